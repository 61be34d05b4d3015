package main

import (
	"cmp"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/dlqdash/dlqdash/emulator"
)

// The emulator's environment variables beyond config.go's.
const (
	envEmulatorNamespaces = "DLQDASH_EMULATOR_NAMESPACES"
	envEmulatorTLSCert    = "DLQDASH_EMULATOR_TLS_CERT"
	envEmulatorTLSKey     = "DLQDASH_EMULATOR_TLS_KEY"
	envEmulatorTLSCAOut   = "DLQDASH_EMULATOR_TLS_CA_OUT"
	envEmulatorJWTKeyFile = "DLQDASH_EMULATOR_JWT_KEY_FILE"
	envEmulatorJWTKey     = "DLQDASH_EMULATOR_JWT_KEY"
)

// EmulatorNamespace is one --namespace of `dlqdash emulator`.
type EmulatorNamespace struct {
	Name       string
	AMQPAddr   string
	AdminAddr  string
	ConfigPath string // its entities; empty: those of --config (or the sample)
}

// namespaceSpecs is the repeated --namespace flag. It starts with the
// specs of its environment variable (separated by ';'); the first
// --namespace replaces them.
type namespaceSpecs struct {
	specs   []string
	fromEnv bool
}

func (n *namespaceSpecs) String() string { return strings.Join(n.specs, ";") }

func (n *namespaceSpecs) Set(v string) error {
	if n.fromEnv {
		n.specs, n.fromEnv = nil, false
	}
	n.specs = append(n.specs, v)
	return nil
}

const namespaceFlagHelp = "serve this namespace, each on its own listeners (repeat for several; without any, one namespace on --amqp-addr and --admin-addr): NAME[,amqp=HOST:PORT][,admin=HOST:PORT][,config=FILE]. " +
	"NAME is a DNS label such as prod-eu; namespace i (from 0) listens by default on the ports of --amqp-addr and --admin-addr plus i, " +
	"with the entities of --config unless its own config= is given. stdout then has one 'NAME CONNECTION-STRING' line per namespace. Several are separated by ';' in the environment variable"

func emulatorFlags(f *flagSet) {
	f.str("amqp-addr", envEmulatorAMQPAddr, defaultEmulatorAMQP, "address the emulator's AMQP 1.0 endpoint listens on")
	f.str("admin-addr", envEmulatorAdmin, defaultEmulatorAdm, "address the emulator's admin HTTP endpoint listens on")
	f.str("config", envEmulatorConfig, "", "entities to create, in the Microsoft Service Bus emulator's Config.json format")
	ns := &namespaceSpecs{}
	if e := strings.TrimSpace(f.getenv(envEmulatorNamespaces)); e != "" {
		for _, s := range strings.Split(e, ";") {
			if s = strings.TrimSpace(s); s != "" {
				ns.specs = append(ns.specs, s)
			}
		}
		ns.fromEnv = true
	}
	f.fs.Var(ns, "namespace", namespaceFlagHelp)
	f.specs = append(f.specs, flagSpec{"namespace", envEmulatorNamespaces, "", namespaceFlagHelp})
	f.str("tls-cert", envEmulatorTLSCert, "", "PEM certificate (chain) to serve AMQPS and HTTPS admin with, instead of plain AMQP and HTTP; needs --tls-key")
	f.str("tls-key", envEmulatorTLSKey, "", "PEM private key of --tls-cert")
	f.str("tls-ca-out", envEmulatorTLSCAOut, "", "serve TLS and write the certificate clients must trust to this file (PEM); without --tls-cert the emulator generates a self-signed one for localhost, 127.0.0.1, ::1 and each namespace name")
	f.str("jwt-key-file", envEmulatorJWTKeyFile, "", "file holding the key Entra ID style tokens (JWT, HS256) must be signed with; without it (or "+envEmulatorJWTKey+") every such token is refused")
	logFlags(f)
}

// parseEmulatorConfig reads the emulator's flags, and its SAS and JWT keys
// from the environment.
func parseEmulatorConfig(cfg *Config, f *flagSet, getenv func(string) string, bad func(string, ...any) error) error {
	var err error
	if cfg.Emulator.AMQPAddr, err = f.addr("amqp-addr", bad); err != nil {
		return err
	}
	if cfg.Emulator.AdminAddr, err = f.addr("admin-addr", bad); err != nil {
		return err
	}
	cfg.Emulator.ConfigPath = f.get("config")
	cfg.Emulator.KeyName = cmp.Or(strings.TrimSpace(getenv(envEmulatorKeyName)), emulator.DefaultKeyName)
	cfg.Emulator.Key = secret(cmp.Or(getenv(envEmulatorKey), emulator.DefaultKey))
	rules, err := parseSASRules(getenv(envEmulatorSASRules), cfg.Emulator.KeyName)
	if err != nil {
		return bad("%s: %v", envEmulatorSASRules, err)
	}
	cfg.Emulator.SASRules = rules

	specs := f.fs.Lookup("namespace").Value.(*namespaceSpecs)
	seen := map[string]bool{}
	for i, spec := range specs.specs {
		n, err := parseNamespaceSpec(spec, i, cfg.Emulator.AMQPAddr, cfg.Emulator.AdminAddr)
		if err != nil {
			return bad("invalid namespace %q from %s: %v", spec, f.source("namespace"), err)
		}
		if seen[strings.ToLower(n.Name)] {
			return bad("namespace %q is given twice", n.Name)
		}
		seen[strings.ToLower(n.Name)] = true
		cfg.Emulator.Namespaces = append(cfg.Emulator.Namespaces, n)
	}

	cfg.Emulator.TLSCert = strings.TrimSpace(f.get("tls-cert"))
	cfg.Emulator.TLSKey = strings.TrimSpace(f.get("tls-key"))
	cfg.Emulator.TLSCAOut = strings.TrimSpace(f.get("tls-ca-out"))
	if (cfg.Emulator.TLSCert == "") != (cfg.Emulator.TLSKey == "") {
		return bad("give both --tls-cert and --tls-key, or neither (--tls-ca-out alone generates a certificate)")
	}
	cfg.Emulator.JWTKeyFile = strings.TrimSpace(f.get("jwt-key-file"))
	cfg.Emulator.JWTKey = secret(strings.TrimSpace(getenv(envEmulatorJWTKey)))
	if cfg.Emulator.JWTKeyFile != "" && cfg.Emulator.JWTKey != "" {
		return bad("give the JWT key once: --jwt-key-file (%s) or %s, not both", envEmulatorJWTKeyFile, envEmulatorJWTKey)
	}
	if k := cfg.Emulator.JWTKey; k != "" && len(k) < minJWTKey {
		return bad("%s has %d bytes; use at least %d (for example: openssl rand -base64 32)", envEmulatorJWTKey, len(k), minJWTKey)
	}
	return nil
}

// parseSASRules reads DLQDASH_EMULATOR_SAS_RULES: rules separated by ';',
// each KEYNAME:RIGHTS:KEY with RIGHTS among Manage, Send and Listen joined
// by ',' (Manage needs the other two), e.g.
// "SendOnly:Send:c2VuZA==;ListenOnly:Listen:bGlzdGVu". The key is the rest
// after the second ':' and never appears in an error.
func parseSASRules(v, mainKeyName string) ([]EmulatorSASRule, error) {
	var rules []EmulatorSASRule
	seen := map[string]bool{strings.ToLower(mainKeyName): true}
	for i, part := range strings.Split(v, ";") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		name, rest, ok1 := strings.Cut(part, ":")
		rights, key, ok2 := strings.Cut(rest, ":")
		name = strings.TrimSpace(name)
		if !ok1 || !ok2 || name == "" || strings.TrimSpace(key) == "" {
			return nil, fmt.Errorf("rule %d is not KEYNAME:RIGHTS:KEY (e.g. SendOnly:Send:c2VuZA==)", i+1)
		}
		if seen[strings.ToLower(name)] {
			return nil, fmt.Errorf("rule %d: the key name %q is used twice (or is the main key's, %s)", i+1, name, envEmulatorKeyName)
		}
		seen[strings.ToLower(name)] = true
		r := EmulatorSASRule{KeyName: name, Key: secret(strings.TrimSpace(key))}
		for _, right := range strings.Split(rights, ",") {
			switch right = strings.TrimSpace(right); right {
			case "Manage", "Send", "Listen":
				r.Rights = append(r.Rights, right)
			default:
				return nil, fmt.Errorf("rule %q: right %q is not Manage, Send or Listen", name, right)
			}
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// minJWTKey is the shortest JWT key the emulator takes, in bytes: an HS256
// key as long as the hash (servicebus/devcred signs with no shorter one).
const minJWTKey = 32

// parseNamespaceSpec reads NAME[,amqp=ADDR][,admin=ADDR][,config=FILE]
// ("name=NAME" also). The i-th namespace without addresses takes the ports
// of amqpAddr and adminAddr plus i.
func parseNamespaceSpec(spec string, i int, amqpAddr, adminAddr string) (EmulatorNamespace, error) {
	var n EmulatorNamespace
	for j, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			if j != 0 {
				return n, fmt.Errorf("%q is not key=value (keys: amqp, admin, config)", part)
			}
			k, v = "name", part
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "name":
			n.Name = v
		case "amqp":
			n.AMQPAddr = v
		case "admin":
			n.AdminAddr = v
		case "config":
			n.ConfigPath = v
		default:
			return n, fmt.Errorf("unknown key %q (keys: name, amqp, admin, config)", k)
		}
	}
	if !emulator.ValidNamespaceName(n.Name) {
		return n, fmt.Errorf("the name must be a DNS label such as prod-eu (letters, digits, hyphens), got %q", n.Name)
	}
	var err error
	if n.AMQPAddr == "" {
		n.AMQPAddr, err = shiftPort(amqpAddr, i)
	} else {
		err = validateAddr(n.AMQPAddr)
	}
	if err != nil {
		return n, fmt.Errorf("amqp: %w", err)
	}
	if n.AdminAddr == "" {
		n.AdminAddr, err = shiftPort(adminAddr, i)
	} else {
		err = validateAddr(n.AdminAddr)
	}
	if err != nil {
		return n, fmt.Errorf("admin: %w", err)
	}
	return n, nil
}

// shiftPort is addr with its port plus i (port 0 stays 0: a free port).
func shiftPort(addr string, i int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	if p == 0 {
		return addr, nil
	}
	if p+i > 65535 {
		return "", fmt.Errorf("port %d + %d is past 65535; give the address", p, i)
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i)), nil
}
