package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/dlqdash/dlqdash/alert"
	"github.com/dlqdash/dlqdash/auth"
	"github.com/dlqdash/dlqdash/servicebus"
	"github.com/dlqdash/dlqdash/servicebus/connstr"
)

// The configuration file (--config, DLQDASH_CONFIG): the namespaces serve
// watches, how it signs in to each, and which roles people have in each.
// Secrets are never in the file: it names environment variables (_env) or
// files (_file) that hold them. parseConfigFile reads it; it is pure, and
// every error names the line and the key at fault.

const envConfig = "DLQDASH_CONFIG"

// Credential kinds (the credential key).
const (
	credDefault          = "default"           // DefaultAzureCredential
	credManagedIdentity  = "managed_identity"  // ManagedIdentityCredential, optional client_id
	credWorkloadIdentity = "workload_identity" // WorkloadIdentityCredential, optional client_id, tenant_id
	credClientSecret     = "client_secret"     // ClientSecretCredential: tenant_id, client_id, a secret
	credEmulator         = "emulator"          // tokens signed with a key the emulator shares (tests only)
)

// Transports (the transport key).
const (
	transportAMQP       = servicebus.TransportAMQP       // AMQP over TLS on 5671
	transportWebSockets = servicebus.TransportWebSockets // AMQP over WebSockets on 443
)

// FileConfig is a parsed configuration file.
type FileConfig struct {
	Namespaces []NamespaceConfig
	Access     []AccessRule
	// Alerts are the alert webhooks (config_alerts.go).
	Alerts []alert.Webhook
}

// AccessRule is an access rule and the line it is on, for messages.
type AccessRule struct {
	auth.Rule
	Line int
}

// NamespaceConfig is one entry of namespaces: either ConnectionString (SAS)
// or FullyQualifiedNamespace with a Credential (Entra ID).
type NamespaceConfig struct {
	Name string // unique, [a-z0-9][a-z0-9._-]*: shown in the UI, the API and the audit
	Line int    // where the entry starts

	ConnectionString        connstr.ConnectionString // from connection_string_env or _file; zero with a credential
	FullyQualifiedNamespace string                   // host[:port]; empty with a connection string
	Credential              CredentialConfig         // with FullyQualifiedNamespace

	Transport      string // transportAMQP or transportWebSockets
	CustomEndpoint string // host[:port] to connect to instead of the namespace's own (a private endpoint, a proxy, a test)
	TLSCAFile      string // tls_ca_file as written
	TLSCA          []byte // its PEM certificates, checked: trust them for this namespace
	AdminEndpoint  string // the admin API's base URL; empty for the default
}

// Host is the namespace's host[:port], as logged and shown.
func (n NamespaceConfig) Host() string {
	if n.FullyQualifiedNamespace != "" {
		return n.FullyQualifiedNamespace
	}
	return n.ConnectionString.Namespace()
}

// CredentialConfig says how to get Entra ID tokens for a namespace.
type CredentialConfig struct {
	Kind         string // one of the cred* constants
	TenantID     string // client_secret (required), workload_identity (optional)
	ClientID     string // client_secret (required), managed_identity and workload_identity (optional)
	ClientSecret secret // client_secret, from client_secret_env or _file
	SigningKey   secret // emulator, from signing_key_env or _file
}

var (
	namespaceNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	envNameRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const maxNamespaceName = 63

var (
	topKeys       = []string{"namespaces", "access", "alerts"}
	namespaceKeys = []string{"name", "connection_string_env", "connection_string_file", "fully_qualified_namespace", "credential",
		"tenant_id", "client_id", "client_secret_env", "client_secret_file", "signing_key_env", "signing_key_file",
		"transport", "custom_endpoint", "tls_ca_file", "admin_endpoint"}
	accessKeys = []string{"group", "token", "role", "namespaces"}
	// Keys that would put a secret in the file, and the keys to use instead.
	secretKeys = map[string]string{
		"connection_string":       "connection_string",
		"shared_access_key":       "connection_string",
		"shared_access_signature": "connection_string",
		"client_secret":           "client_secret",
		"signing_key":             "signing_key",
		"url":                     "url", // an alert webhook's URL
	}
	// The keys only a credential (fully_qualified_namespace) takes.
	credentialKeys = []string{"credential", "tenant_id", "client_id", "client_secret_env", "client_secret_file", "signing_key_env", "signing_key_file"}
	// Which of those each kind takes, beyond credential itself.
	credentialKindKeys = map[string][]string{
		credDefault:          nil,
		credManagedIdentity:  {"client_id"},
		credWorkloadIdentity: {"client_id", "tenant_id"},
		credClientSecret:     {"client_id", "tenant_id", "client_secret_env", "client_secret_file"},
		credEmulator:         {"signing_key_env", "signing_key_file"},
	}
)

// fileError is a mistake in the file: its line and what is wrong.
type fileError struct {
	line int
	msg  string
}

func (e *fileError) Error() string {
	if e.line == 0 {
		return e.msg
	}
	return fmt.Sprintf("line %d: %s", e.line, e.msg)
}

func errAt(line int, format string, a ...any) error {
	return &fileError{line: line, msg: fmt.Sprintf(format, a...)}
}

// parseConfigFile reads a configuration file. getenv and readFile resolve
// the _env and _file keys (and tls_ca_file); nothing else is read.
func parseConfigFile(data []byte, getenv func(string) string, readFile func(string) ([]byte, error)) (FileConfig, error) {
	var fc FileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return fc, errors.New("the file is empty: it needs a namespaces: list")
		}
		return fc, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return fc, errAt(extra.Line, "a second YAML document: the configuration is one document")
	} else if !errors.Is(err, io.EOF) {
		return fc, yamlError(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return fc, errAt(root.Line, "the file must be a mapping with namespaces: (and optionally access:)")
	}
	top, err := readFields(root, "the file", topKeys)
	if err != nil {
		return fc, err
	}
	nsNode, ok := top.vals["namespaces"]
	if !ok {
		return fc, errAt(root.Line, "the file has no namespaces: list")
	}
	if nsNode.Kind != yaml.SequenceNode || len(nsNode.Content) == 0 {
		return fc, errAt(nsNode.Line, "namespaces must be a list with at least one namespace (- name: ...)")
	}
	first := map[string]int{} // name → index
	for i, n := range nsNode.Content {
		ns, err := parseNamespace(n, fmt.Sprintf("namespaces[%d]", i), getenv, readFile)
		if err != nil {
			return fc, err
		}
		if j, dup := first[ns.Name]; dup {
			return fc, errAt(ns.Line, "name %q in namespaces[%d] is already the name of namespaces[%d] (line %d): names must be unique",
				ns.Name, i, j, fc.Namespaces[j].Line)
		}
		first[ns.Name] = i
		fc.Namespaces = append(fc.Namespaces, ns)
	}
	if a, ok := top.vals["access"]; ok {
		if fc.Access, err = parseAccess(a, first); err != nil {
			return fc, err
		}
	}
	if a, ok := top.vals["alerts"]; ok {
		if fc.Alerts, err = parseAlerts(a, getenv, readFile); err != nil {
			return fc, err
		}
	}
	return fc, nil
}

// yamlError words a YAML syntax error like the others: "line N: ...".
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return errors.New("not valid YAML: " + msg)
}

// fields are the keys of one mapping, checked against the known ones.
type fields struct {
	where string // "namespaces[1]", for messages
	line  int
	vals  map[string]*yaml.Node
	lines map[string]int // each key's line
}

func readFields(n *yaml.Node, where string, known []string) (fields, error) {
	f := fields{where: where, line: n.Line, vals: map[string]*yaml.Node{}, lines: map[string]int{}}
	if n.Kind != yaml.MappingNode {
		return f, errAt(n.Line, "%s must be a mapping of keys (key: value)", where)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return f, errAt(k.Line, "a key in %s is not a plain name", where)
		}
		name := k.Value
		if use, ok := secretKeys[name]; ok {
			return f, errAt(k.Line, "key %q in %s would put a secret in the file: name an environment variable with %s_env or a file with %s_file instead",
				name, where, use, use)
		}
		if !slices.Contains(known, name) {
			msg := fmt.Sprintf("unknown key %q in %s", name, where)
			if s := closestKey(name, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			return f, errAt(k.Line, "%s", msg)
		}
		if l, dup := f.lines[name]; dup {
			return f, errAt(k.Line, "key %q given twice in %s (first on line %d)", name, where, l)
		}
		f.vals[name], f.lines[name] = v, k.Line
	}
	return f, nil
}

func (f fields) has(key string) bool { _, ok := f.vals[key]; return ok }

// str is the value of key, a single non-empty value; "" when absent.
func (f fields) str(key string) (string, error) {
	v, ok := f.vals[key]
	if !ok {
		return "", nil
	}
	if v.Kind != yaml.ScalarNode {
		return "", errAt(f.lines[key], "%s in %s must be a single value, not a list or mapping", key, f.where)
	}
	s := strings.TrimSpace(v.Value)
	if v.Tag == "!!null" || s == "" {
		return "", errAt(f.lines[key], "%s in %s is empty", key, f.where)
	}
	return s, nil
}

// bad is an error at key's line, naming the key and where it is.
func (f fields) bad(key, format string, a ...any) error {
	return errAt(f.lines[key], "%s in %s: %s", key, f.where, fmt.Sprintf(format, a...))
}

// oneOf reports which of keys are present, refusing more than one.
func (f fields) oneOf(keys ...string) (string, error) {
	var got []string
	for _, k := range keys {
		if f.has(k) {
			got = append(got, k)
		}
	}
	if len(got) > 1 {
		return "", errAt(f.lines[got[1]], "%s and %s are both in %s: give one", got[0], got[1], f.where)
	}
	if len(got) == 0 {
		return "", nil
	}
	return got[0], nil
}

func parseNamespace(n *yaml.Node, where string, getenv func(string) string, readFile func(string) ([]byte, error)) (NamespaceConfig, error) {
	ns := NamespaceConfig{Line: n.Line, Transport: transportAMQP}
	f, err := readFields(n, where, namespaceKeys)
	if err != nil {
		return ns, err
	}
	if !f.has("name") {
		return ns, errAt(n.Line, "%s has no name", where)
	}
	if ns.Name, err = f.str("name"); err != nil {
		return ns, err
	}
	if len(ns.Name) > maxNamespaceName || !namespaceNameRE.MatchString(ns.Name) {
		return ns, f.bad("name", "%q is not a valid name: want lower-case letters, digits, '.', '_' and '-', starting with a letter or digit, at most %d", ns.Name, maxNamespaceName)
	}
	f.where = fmt.Sprintf("%s (%s)", where, ns.Name)

	source, err := f.oneOf("connection_string_env", "connection_string_file", "fully_qualified_namespace")
	if err != nil {
		return ns, err
	}
	switch source {
	case "":
		return ns, errAt(n.Line, "%s needs connection_string_env or connection_string_file (a SAS connection string), or fully_qualified_namespace and credential (Entra ID)", f.where)
	case "connection_string_env", "connection_string_file":
		for _, k := range credentialKeys {
			if f.has(k) {
				return ns, f.bad(k, "applies only with fully_qualified_namespace: a connection string signs in with its own SAS key")
			}
		}
		raw, err := f.secret(source, "connection string", getenv, readFile)
		if err != nil {
			return ns, err
		}
		if ns.ConnectionString, err = connstr.Parse(string(raw)); err != nil {
			return ns, f.bad(source, "the connection string %v", err)
		}
	case "fully_qualified_namespace":
		host, _ := f.str(source)
		if err := checkHostPort(host); err != nil {
			return ns, f.bad(source, "%q %v, e.g. contoso.servicebus.windows.net", host, err)
		}
		ns.FullyQualifiedNamespace = host
		if ns.Credential, err = parseCredential(f, getenv, readFile); err != nil {
			return ns, err
		}
	}

	if f.has("transport") {
		t, err := f.str("transport")
		if err != nil {
			return ns, err
		}
		if t != transportAMQP && t != transportWebSockets {
			return ns, f.bad("transport", "%q is not a transport: want amqp (port 5671) or websockets (port 443)", t)
		}
		ns.Transport = t
	}
	if f.has("custom_endpoint") {
		e, err := f.str("custom_endpoint")
		if err != nil {
			return ns, err
		}
		if err := checkEndpoint(e); err != nil {
			return ns, f.bad("custom_endpoint", "%q %v", e, err)
		}
		ns.CustomEndpoint = e
	}
	if f.has("tls_ca_file") {
		path, err := f.str("tls_ca_file")
		if err != nil {
			return ns, err
		}
		data, err := readFile(path)
		if err != nil {
			return ns, f.bad("tls_ca_file", "%v", err)
		}
		if err := checkPEMCertificates(data); err != nil {
			return ns, f.bad("tls_ca_file", "%s %v", path, err)
		}
		ns.TLSCAFile, ns.TLSCA = path, data
	}
	if f.has("admin_endpoint") {
		a, err := f.str("admin_endpoint")
		if err != nil {
			return ns, err
		}
		u, perr := url.Parse(a)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return ns, f.bad("admin_endpoint", "%q is not a base URL: want http(s)://host[:port]", a)
		}
		ns.AdminEndpoint = a
	}
	return ns, nil
}

func parseCredential(f fields, getenv func(string) string, readFile func(string) ([]byte, error)) (CredentialConfig, error) {
	var c CredentialConfig
	kinds := []string{credDefault, credManagedIdentity, credWorkloadIdentity, credClientSecret, credEmulator}
	if !f.has("credential") {
		return c, errAt(f.lines["fully_qualified_namespace"], "%s has fully_qualified_namespace but no credential: want credential: %s", f.where, orList(kinds))
	}
	kind, err := f.str("credential")
	if err != nil {
		return c, err
	}
	takes, ok := credentialKindKeys[kind]
	if !ok {
		return c, f.bad("credential", "%q is not a credential: want %s", kind, orList(kinds))
	}
	c.Kind = kind
	for _, k := range credentialKeys[1:] {
		if f.has(k) && !slices.Contains(takes, k) {
			hint := ""
			if kind == credDefault || kind == credWorkloadIdentity {
				hint = " (it reads AZURE_CLIENT_ID, AZURE_TENANT_ID and the like from the environment)"
			}
			return c, f.bad(k, "does not apply to credential %s%s", kind, hint)
		}
	}
	if c.ClientID, err = f.str("client_id"); err != nil {
		return c, err
	}
	if c.TenantID, err = f.str("tenant_id"); err != nil {
		return c, err
	}
	switch kind {
	case credClientSecret:
		for _, k := range []string{"tenant_id", "client_id"} {
			if !f.has(k) {
				return c, f.bad("credential", "client_secret needs %s", k)
			}
		}
		key, err := f.oneOf("client_secret_env", "client_secret_file")
		if err != nil {
			return c, err
		}
		if key == "" {
			return c, f.bad("credential", "client_secret needs client_secret_env (an environment variable) or client_secret_file (a file) holding the secret")
		}
		if c.ClientSecret, err = f.secret(key, "client secret", getenv, readFile); err != nil {
			return c, err
		}
	case credEmulator:
		key, err := f.oneOf("signing_key_env", "signing_key_file")
		if err != nil {
			return c, err
		}
		if key == "" {
			return c, f.bad("credential", "emulator needs signing_key_env (an environment variable) or signing_key_file (a file) holding the emulator's signing key")
		}
		if c.SigningKey, err = f.secret(key, "signing key", getenv, readFile); err != nil {
			return c, err
		}
	}
	return c, nil
}

// secret reads the secret a _env or _file key points to. Its errors name
// the variable or the file, never the value: a secret pasted where a name
// belongs is refused without being echoed.
func (f fields) secret(key, what string, getenv func(string) string, readFile func(string) ([]byte, error)) (secret, error) {
	ref, err := f.str(key)
	if err != nil {
		return "", err
	}
	var raw string
	if strings.HasSuffix(key, "_env") {
		if !envNameRE.MatchString(ref) {
			return "", f.bad(key, "want the name of an environment variable (letters, digits and _) that holds the %s, not the %s itself", what, what)
		}
		if raw = strings.TrimSpace(getenv(ref)); raw == "" {
			return "", f.bad(key, "the environment variable %s is not set (or empty): it should hold the %s", ref, what)
		}
		return secret(raw), nil
	}
	if looksLikeSecret(ref) {
		return "", f.bad(key, "want the path of a file that holds the %s, not the %s itself", what, what)
	}
	data, err := readFile(ref)
	if err != nil {
		return "", f.bad(key, "%v", err)
	}
	if raw = strings.TrimSpace(string(data)); raw == "" {
		return "", f.bad(key, "the file %s is empty: it should hold the %s", ref, what)
	}
	return secret(raw), nil
}

// looksLikeSecret: a connection string (or part of one) where a file path
// belongs.
func looksLikeSecret(s string) bool {
	l := strings.ToLower(s)
	return strings.Contains(l, "sharedaccesskey") || strings.Contains(l, "sharedaccesssignature") || strings.Contains(l, "endpoint=sb://")
}

// checkHostPort accepts host or host:port, without a scheme or path.
func checkHostPort(s string) error {
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/?#@ ") {
		return errors.New("is not a host name: want host or host:port only, no scheme or path")
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	} else if strings.Contains(s, ":") && !strings.HasPrefix(s, "[") {
		return errors.New("is not host:port")
	}
	if host == "" {
		return errors.New("has no host")
	}
	return nil
}

// checkEndpoint accepts what servicebus.Options.CustomEndpoint takes:
// host[:port], or a URL of scheme amqps (AMQP over TCP), https or http
// (over WebSockets) with no path.
func checkEndpoint(s string) error {
	const want = "want host[:port] or amqps://, https:// or http://host[:port], e.g. sb-private.contoso.internal:5671"
	if !strings.Contains(s, "://") {
		if err := checkHostPort(s); err != nil {
			return fmt.Errorf("is not an endpoint: %s", want)
		}
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "amqps" && u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("is not an endpoint: %s", want)
	}
	return nil
}

// checkPEMCertificates wants at least one certificate and nothing else.
func checkPEMCertificates(data []byte) error {
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("holds a %s block: want PEM certificates only (never a private key)", b.Type)
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return fmt.Errorf("holds a certificate that does not parse: %w", err)
		}
		n++
	}
	if n == 0 {
		return errors.New("holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	return nil
}

func parseAccess(n *yaml.Node, names map[string]int) ([]AccessRule, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, errAt(n.Line, "access must be a list of rules (- group: ..., role: ..., namespaces: [...])")
	}
	var rules []AccessRule
	for i, rn := range n.Content {
		where := fmt.Sprintf("access[%d]", i)
		f, err := readFields(rn, where, accessKeys)
		if err != nil {
			return nil, err
		}
		r := AccessRule{Line: rn.Line}
		subject, err := f.oneOf("group", "token")
		if err != nil {
			return nil, err
		}
		switch subject {
		case "":
			return nil, errAt(rn.Line, "%s needs group (a group as --admin-groups, --operator-groups and --viewer-groups name it, or *) or token (an API token's name)", where)
		case "group":
			r.Group, err = f.str("group")
		case "token":
			r.Token, err = f.str("token")
		}
		if err != nil {
			return nil, err
		}
		if !f.has("role") {
			return nil, errAt(rn.Line, "%s has no role: want viewer, operator, admin or none", where)
		}
		role, err := f.str("role")
		if err != nil {
			return nil, err
		}
		if strings.EqualFold(role, "none") {
			r.Role = auth.NoRole
		} else if r.Role, err = auth.ParseRole(role); err != nil {
			return nil, f.bad("role", "%q is not a role: want viewer, operator, admin or none", role)
		}
		if !f.has("namespaces") {
			return nil, errAt(rn.Line, "%s has no namespaces: want a list of namespace names, or [\"*\"] for all", where)
		}
		list := f.vals["namespaces"]
		items := []*yaml.Node{list}
		if list.Kind == yaml.SequenceNode {
			items = list.Content
		}
		if len(items) == 0 {
			return nil, f.bad("namespaces", "is empty: want namespace names, or [\"*\"] for all")
		}
		for _, item := range items {
			if item.Kind != yaml.ScalarNode || strings.TrimSpace(item.Value) == "" {
				return nil, f.bad("namespaces", "want namespace names, or [\"*\"] for all")
			}
			name := strings.TrimSpace(item.Value)
			if _, ok := names[name]; !ok && name != auth.AllNamespaces {
				return nil, errAt(item.Line, "namespaces in %s: no namespace %q in the namespaces list", where, name)
			}
			r.Namespaces = append(r.Namespaces, name)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// closestKey is the known key within two edits of key, for "did you mean".
func closestKey(key string, known []string) string {
	if len(key) > 64 {
		return "" // no key is that long; spare the quadratic distance
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// loadConfigFile reads cfg.ConfigFile into cfg.Namespaces and the access
// rules into cfg.Access. Its errors are *usageError: the file is part of
// the configuration, refused before anything starts.
func loadConfigFile(cfg *Config, getenv func(string) string, readFile func(string) ([]byte, error)) error {
	bad := func(format string, a ...any) error {
		return &usageError{msg: "config file " + cfg.ConfigFile + ": " + fmt.Sprintf(format, a...), command: cfg.Command}
	}
	data, err := readFile(cfg.ConfigFile)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("cannot read the config file: %v", err), command: cfg.Command}
	}
	fc, err := parseConfigFile(data, getenv, readFile)
	if err != nil {
		return bad("%v", err)
	}
	cfg.Namespaces = fc.Namespaces
	cfg.Alerts.Webhooks = fc.Alerts
	cfg.Access = auth.Policy{Mapping: cfg.Auth.Mapping}
	for i, r := range fc.Access {
		if r.Group != "" && cfg.Auth.Mode == auth.ModeNone {
			// Without sign-in nobody has groups: the rule could never apply.
			return bad("line %d: access[%d] limits group %q, but with --auth none there are no groups (everyone is the local admin): sign in with --auth oidc or proxy, or limit API tokens (token: NAME)",
				r.Line, i, r.Group)
		}
		cfg.Access.Rules = append(cfg.Access.Rules, r.Rule)
	}
	if i, err := cfg.Access.Check(); err != nil {
		return bad("line %d: access[%d]: %v", fc.Access[i].Line, i, err)
	}
	return nil
}
