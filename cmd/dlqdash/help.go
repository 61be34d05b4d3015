package main

import (
	"fmt"
	"strings"

	"github.com/dlqdash/dlqdash/emulator"
	"github.com/dlqdash/dlqdash/emulator/config"
	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

func topHelp() string {
	var b strings.Builder
	b.WriteString("dlqdash: triage and replay Azure Service Bus dead-lettered messages.\n\n")
	b.WriteString("Usage:\n  dlqdash <command> [flags]\n\nCommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, c.name, c.summary)
	}
	b.WriteString("\nRun 'dlqdash <command> -h' for a command's flags.\n")
	return b.String()
}

// groupHelp is the help of a two-word command group: its subcommands.
func groupHelp(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dlqdash %s: the %s subcommands.\n\nUsage:\n  dlqdash %s <%s> [flags]\n\nSubcommands:\n",
		group, group, group, strings.Join(subcommands(group), "|"))
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			fmt.Fprintf(&b, "  %-8s %s\n", sub, c.summary)
		}
	}
	fmt.Fprintf(&b, "\nRun 'dlqdash %s <subcommand> -h' for a subcommand's flags.\n", group)
	return b.String()
}

func commandHelp(c command, getenv func(string) string) string {
	f := newFlagSet(c, getenv)
	var b strings.Builder
	fmt.Fprintf(&b, "dlqdash %s: %s.\n\nUsage:\n  dlqdash %s [flags]\n\nFlags (each defaults to its environment variable, then to the default shown):\n", c.name, c.summary, c.name)
	for _, s := range f.specs {
		fmt.Fprintf(&b, "  --%s\n        %s", s.name, s.meaning)
		switch {
		case s.env != "" && s.def != "":
			fmt.Fprintf(&b, "\n        env %s, default %s", s.env, s.def)
		case s.env != "":
			fmt.Fprintf(&b, "\n        env %s", s.env)
		case s.def != "":
			fmt.Fprintf(&b, "\n        default %s", s.def)
		}
		b.WriteString("\n")
	}
	if c.name == "emulator" {
		fmt.Fprintf(&b, "\nEnvironment:\n  %s, %s\n        the SAS key name and key clients must sign with (default %s and\n        %s, the well-known key of Microsoft's emulator). Only from the environment.\n",
			envEmulatorKeyName, envEmulatorKey, emulator.DefaultKeyName, emulator.DefaultKey)
		fmt.Fprintf(&b, "  %s\n        further SAS keys with fewer rights, as an Azure namespace's shared access\n        policies: KEYNAME:RIGHTS:KEY;... with RIGHTS among Manage, Send, Listen joined\n        by ',', e.g. SendOnly:Send:c2VuZA==;ListenOnly:Listen:bGlzdGVu. Without Send a\n        key cannot attach senders, without Listen receivers, without Manage it gets\n        401 from the admin API (reading a missing entity is still 404).\n", envEmulatorSASRules)
		fmt.Fprintf(&b, "  %s\n        the key itself instead of --jwt-key-file (at least 32 bytes). Tokens of type\n        jwt ($cbs) and bearer tokens (admin API) must be HS256-signed with it, for the\n        audience https://servicebus.azure.net, and not expired; servicebus/devcred signs\n        such tokens. SAS keeps working beside them.\n", envEmulatorJWTKey)
		fmt.Fprintf(&b, "\nEntities:\n%s\n", indent(config.DefaultsHelp(), "  "))
		b.WriteString(webSocketHelp)
		b.WriteString(faultInjectionHelp)
	}
	if c.name == "serve" {
		fmt.Fprintf(&b, "\nEnvironment:\n  %s (required)\n        the namespace's connection string, e.g.\n        %s\n        Only from the environment, never a flag; never logged.\n", envConnectionString, connstr.Shape)
	}
	if c.name == "serve" || c.name == "demo" {
		b.WriteString(authHelp)
	}
	return b.String()
}

// webSocketHelp is the admin listener's AMQP over WebSockets endpoint
// (emulator/internal/amqpws).
const webSocketHelp = `
AMQP over WebSockets (admin listener, as Azure serves it on 443):
  GET    /$servicebus/websocket  (WebSocket upgrade, subprotocol AMQPWSB10)
        binary messages carry an AMQP connection, served like the AMQP
        listener's; dlqdash serve --servicebus-transport websockets uses it
`

// faultInjectionHelp ends `dlqdash emulator -h`: the admin listener's
// /$emulator/faults and /$emulator/stats endpoints
// (emulator/atom/faults.go, stats.go).
const faultInjectionHelp = `
Fault injection (admin listener; each request needs a SharedAccessSignature
Authorization header like every admin request, 204 on success):
  POST   /$emulator/faults/server-busy?entity=<path>&ops=<n>&for=<duration>
        the next n operations on the entity (send, receive attach, peek,
        receive-deferred, schedule; not settlement), and all within the span,
        fail with com.microsoft:server-busy (management: 503)
  POST   /$emulator/faults/expire-locks?entity=<path>
        every message lock held on the entity expires now
  POST   /$emulator/faults/drop-connections
        every AMQP connection is closed with amqp:connection:forced
  POST   /$emulator/faults/latency?d=<duration>
        every AMQP reply and delivery is delayed by d (0 turns it off)
  DELETE /$emulator/faults
        clears server-busy and latency
  GET    /$emulator/stats  (DELETE resets it, 204)
        operation counters as JSON, in total and per entity path as addressed
        (lower-cased): {"totals": {"peek": 12, "peeked_messages": 3000,
        "receive": 40, "send": 42, "settle": 40, "management": 15, "admin": 3,
        "management_ops": {"peek-message": 12, "renew-lock": 0, ...}},
        "entities": {"orders/$deadletterqueue": {"peek": 12, ...}}}; peek counts
        $management peek requests, peeked_messages the messages they returned
  Any SAS token generator works (the signature is HMAC-SHA256 with the key over
  "<sr>\n<se>"). With the default key, in a shell:
    sr=localhost; se=$(( $(date +%s) + 3600 ))
    sig=$(printf '%s\n%s' "$sr" "$se" | openssl dgst -sha256 -hmac SAS_KEY_VALUE -binary | base64 | sed 's/+/%2B/g;s|/|%2F|g;s/=/%3D/g')
    auth="SharedAccessSignature sr=$sr&sig=$sig&se=$se&skn=RootManageSharedAccessKey"
    curl -X POST -H "Authorization: $auth" 'http://127.0.0.1:5300/$emulator/faults/server-busy?entity=queue.1&ops=3'
    curl -X DELETE -H "Authorization: $auth" 'http://127.0.0.1:5300/$emulator/faults'
    curl -H "Authorization: $auth" 'http://127.0.0.1:5300/$emulator/stats'
`

// indent prefixes every line of s.
func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return strings.TrimRight(b.String(), "\n")
}
