// Package deploy holds the deployment files of dlqdash (compose/,
// kubernetes/); its tests check that they parse and say what must hold for
// three replicas on one PostgreSQL database, against the code they deploy:
// the variables and flags cmd/dlqdash reads, the routes web/routes.go
// serves.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// replicas is how many dlqdash replicas the deployments run (issue 20).
const replicas = 3

// secretEnv are the variables that hold secrets: never written in a
// deployment file, always from an env file or a Secret.
var secretEnv = []string{"DLQDASH_DB", "DLQDASH_DATABASE_URL", "DLQDASH_AUDIT_KEY", "SERVICEBUS_CONNECTION_STRING", "DLQDASH_OIDC_CLIENT_SECRET"}

// foreignEnv are variables the deployments set for programs other than
// dlqdash's own flag parsing, each with its reader.
var foreignEnv = map[string]string{
	"GOMEMLIMIT":             "the Go runtime",
	"POSTGRES_USER":          "the postgres image",
	"POSTGRES_DB":            "the postgres image",
	"POSTGRES_PASSWORD_FILE": "the postgres image",
}

// source is what cmd/dlqdash reads: the string literals naming variables,
// and the flags it declares, from its non-test source.
type source struct {
	env   map[string]bool
	flags map[string]bool
}

var (
	envLiteral  = regexp.MustCompile(`"((?:DLQDASH|SERVICEBUS|AZURE)_[A-Z0-9_]+)"`)
	flagLiteral = regexp.MustCompile(`f\.(?:str|boolEnv)\("([a-z0-9-]+)"`)
	getRoute    = regexp.MustCompile(`\{"GET (/[^" ]*)"`)
)

func readSource(t *testing.T) source {
	t.Helper()
	files, err := filepath.Glob("../cmd/dlqdash/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no source in ../cmd/dlqdash: %v", err)
	}
	s := source{env: map[string]bool{}, flags: map[string]bool{}}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range envLiteral.FindAllSubmatch(b, -1) {
			s.env[string(m[1])] = true
		}
		for _, m := range flagLiteral.FindAllSubmatch(b, -1) {
			s.flags[string(m[1])] = true
		}
	}
	for _, want := range []string{"DLQDASH_DATABASE_URL", "DLQDASH_AUDIT_KEY", "DLQDASH_REPLICA_ID"} {
		if !s.env[want] {
			t.Fatalf("the source scan found no %s in cmd/dlqdash: the scan is broken, or the variable was renamed (then rename it in deploy/ too)", want)
		}
	}
	if !s.flags["db"] || !s.flags["replica-id"] {
		t.Fatalf("the source scan found no --db or --replica-id flag in cmd/dlqdash: %v", s.flags)
	}
	return s
}

// checkEnv fails for a variable that is neither read by cmd/dlqdash nor
// one of foreignEnv.
func (s source) checkEnv(t *testing.T, where, name string) {
	t.Helper()
	if s.env[name] {
		return
	}
	if _, ok := foreignEnv[name]; ok {
		return
	}
	t.Errorf("%s sets %s, which cmd/dlqdash does not read (renamed? misspelt?)", where, name)
}

// checkArgs fails for a --flag that cmd/dlqdash does not declare.
func (s source) checkArgs(t *testing.T, where string, args []string) {
	t.Helper()
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !s.flags[name] {
			t.Errorf("%s passes --%s, which cmd/dlqdash does not declare", where, name)
		}
	}
}

// getRoutes are the paths of the GET routes in web/routes.go.
func getRoutes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../web/routes.go")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, m := range getRoute.FindAllSubmatch(b, -1) {
		paths = append(paths, string(m[1]))
	}
	if !slices.Contains(paths, "/{$}") {
		t.Fatalf("the route scan of web/routes.go found no GET /{$}: %v", paths)
	}
	return paths
}

// decodeAll parses every YAML document of a file.
func decodeAll(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s does not parse: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	if len(docs) == 0 {
		t.Fatalf("%s has no YAML document", path)
	}
	return docs
}

// at walks maps and lists: keys for maps, ints for lists; nil when absent.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func strs(t *testing.T, v any) []string {
	t.Helper()
	if v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("want a list, have %T %v", v, v)
	}
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = str(x)
	}
	return out
}

// readEnvFile reads KEY=VALUE lines (an env file as docker compose reads it).
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is not KEY=VALUE", path, line)
		}
		env[k] = v
	}
	return env
}

func TestYAMLFilesParse(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"compose/compose.yaml", "kubernetes/deployment.yaml"} {
		if !slices.Contains(files, want) {
			t.Fatalf("walk found %v, not %s", files, want)
		}
	}
	for _, f := range files {
		docs := decodeAll(t, f)
		t.Logf("%s: %d documents", f, len(docs))
	}
}

func TestCompose(t *testing.T) {
	src := readSource(t)
	routes := getRoutes(t)
	compose := decodeAll(t, "compose/compose.yaml")[0]
	services, _ := compose["services"].(map[string]any)

	// The replicas: the services that run `dlqdash serve`, built from the
	// repository's Dockerfile.
	var names []string
	for name, svc := range services {
		if cmd := strs(t, at(svc, "command")); len(cmd) > 0 && cmd[0] == "serve" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) != replicas {
		t.Fatalf("compose.yaml runs serve in %d services %v, want %d", len(names), names, replicas)
	}
	hosts := map[string]string{}
	var envFile []string
	for i, name := range names {
		svc := services[name]
		where := "compose.yaml: " + name
		ctx := str(at(svc, "build", "context"))
		df := str(at(svc, "build", "dockerfile"))
		if ctx == "" || df == "" {
			t.Fatalf("%s: no build context and dockerfile", where)
		}
		if _, err := os.Stat(filepath.Join("compose", ctx, df)); err != nil {
			t.Errorf("%s builds %s in %s: %v", where, df, ctx, err)
		}
		if _, err := os.Stat(filepath.Join("compose", ctx, "cmd", "dlqdash")); err != nil {
			t.Errorf("%s: build context %s is not the repository: %v", where, ctx, err)
		}
		src.checkArgs(t, where, strs(t, at(svc, "command")))

		// A distinct replica id: the default (host name + random suffix)
		// from distinct host names, or distinct DLQDASH_REPLICA_IDs.
		env, _ := at(svc, "environment").(map[string]any)
		id := str(env["DLQDASH_REPLICA_ID"])
		if id == "" {
			id = str(at(svc, "hostname"))
			if id == "" {
				t.Errorf("%s has no hostname and no DLQDASH_REPLICA_ID: its replica id would start with the container id", where)
			}
		}
		if other, dup := hosts[id]; dup {
			t.Errorf("%s and %s have the same replica id or host name %q", name, other, id)
		}
		hosts[id] = name

		for k, v := range env {
			src.checkEnv(t, where, k)
			if slices.Contains(secretEnv, k) {
				t.Errorf("%s writes the secret %s in compose.yaml: it belongs in the env file", where, k)
			}
			if k == "DLQDASH_ADDR" && !strings.HasSuffix(str(v), ":8080") {
				t.Errorf("%s listens on %v; the Caddyfile and the image's HEALTHCHECK expect :8080", where, v)
			}
		}
		// The same env file (one database URL, one audit key) for all.
		files := strs(t, at(svc, "env_file"))
		if i == 0 {
			envFile = files
		} else if !slices.Equal(files, envFile) {
			t.Errorf("%s reads env files %v, %s reads %v: every replica needs the same database and audit key", where, files, names[0], envFile)
		}
		if str(at(svc, "depends_on", "postgres", "condition")) != "service_healthy" {
			t.Errorf("%s does not wait for postgres to be healthy", where)
		}
		if str(at(svc, "healthcheck", "disable")) == "true" {
			t.Errorf("%s disables the image's health check", where)
		}
	}
	if !slices.Equal(envFile, []string{"secrets/dlqdash.env"}) {
		t.Errorf("the replicas read %v, want secrets/dlqdash.env (init-secrets.sh writes it)", envFile)
	}

	// PostgreSQL: its password from a docker secret, a health check.
	pg := services["postgres"]
	if pw := str(at(pg, "environment", "POSTGRES_PASSWORD_FILE")); pw != "/run/secrets/postgres_password" {
		t.Errorf("postgres takes its password from %q, want the docker secret /run/secrets/postgres_password", pw)
	}
	if f := str(at(compose, "secrets", "postgres_password", "file")); f != "./secrets/postgres_password" {
		t.Errorf("the secret postgres_password is the file %q, want ./secrets/postgres_password", f)
	}
	if at(pg, "environment", "POSTGRES_PASSWORD") != nil {
		t.Errorf("compose.yaml writes POSTGRES_PASSWORD")
	}
	if at(pg, "healthcheck", "test") == nil {
		t.Errorf("postgres has no health check for the replicas to wait on")
	}

	// The load balancer: every replica, health-checked on a real route.
	caddy, err := os.ReadFile("compose/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	upstreams := regexp.MustCompile(`(?m)^\s*reverse_proxy ([^{]*)\{`).FindSubmatch(caddy)
	if upstreams == nil {
		t.Fatalf("the Caddyfile has no reverse_proxy block")
	}
	var want []string
	for _, n := range names {
		want = append(want, n+":8080")
	}
	if got := strings.Fields(string(upstreams[1])); !slices.Equal(got, want) {
		t.Errorf("Caddy proxies to %v, want the replicas %v", got, want)
	}
	health := regexp.MustCompile(`(?m)^\s*health_uri (\S+)`).FindSubmatch(caddy)
	if health == nil || !slices.Contains(routes, string(health[1])) {
		t.Errorf("Caddy's health_uri %q is not a GET route of web/routes.go", health)
	}
	// No affinity: any replica serves any request, an OIDC sign-in's
	// callback included (its state is in the database), so Caddy spreads
	// requests and never pins a browser (cookie, client address, header
	// or URI hashing).
	policy := "random (the default)"
	if m := regexp.MustCompile(`(?m)^\s*lb_policy\s+(\S+)`).FindSubmatch(caddy); m != nil {
		policy = string(m[1])
	}
	if !slices.Contains([]string{"round_robin", "least_conn", "random (the default)"}, policy) {
		t.Errorf("Caddy's lb_policy is %s, want round_robin, least_conn or random: the replicas need no affinity", policy)
	}
	for _, p := range strs(t, at(services["lb"], "ports")) {
		if !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("the load balancer publishes %s beyond this computer, with --auth none behind it", p)
		}
	}
	// Caddy's X-Forwarded-For is believed from its fixed address only.
	lbAddr := str(at(services["lb"], "networks", "dlqdash", "ipv4_address"))
	if tp := str(at(services[names[0]], "environment", "DLQDASH_TRUSTED_PROXIES")); lbAddr == "" || tp != lbAddr {
		t.Errorf("DLQDASH_TRUSTED_PROXIES is %q, the load balancer's address %q", tp, lbAddr)
	}

	// The emulator: optional, and the connection string's host.
	emu := services["emulator"]
	if !slices.Equal(strs(t, at(emu, "profiles")), []string{"emulator"}) {
		t.Errorf("the emulator is not the optional profile emulator: %v", at(emu, "profiles"))
	}
	emuCmd := strs(t, at(emu, "command"))
	if len(emuCmd) == 0 || emuCmd[0] != "emulator" || !slices.Contains(emuCmd, ":5672") || !slices.Contains(emuCmd, ":5300") {
		t.Errorf("the emulator runs %v, want emulator listening on :5672 and :5300 of its network", emuCmd)
	}
	src.checkArgs(t, "compose.yaml: emulator", emuCmd)
}

// TestInitSecrets runs init-secrets.sh and checks that what it writes is
// what compose.yaml and dlqdash need: one password in both places, a
// PostgreSQL URL to the postgres service, an audit key long enough, the
// emulator's key in the default connection string, nothing readable by
// others, and nothing overwritten.
func TestInitSecrets(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	src := readSource(t)
	dir := filepath.Join(t.TempDir(), "secrets")
	cmd := exec.Command("sh", "compose/init-secrets.sh", dir)
	cmd.Env = append(os.Environ(), "SERVICEBUS_CONNECTION_STRING=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("init-secrets.sh: %v\n%s", err, out)
	}
	for _, f := range []string{"postgres_password", "dlqdash.env", "emulator.env"} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: others may read it", f, fi.Mode().Perm())
		}
	}
	pw, err := os.ReadFile(filepath.Join(dir, "postgres_password"))
	if err != nil {
		t.Fatal(err)
	}
	env := readEnvFile(t, filepath.Join(dir, "dlqdash.env"))
	for k := range env {
		src.checkEnv(t, "dlqdash.env", k)
	}
	u, err := url.Parse(env["DLQDASH_DATABASE_URL"])
	if err != nil || u.Scheme != "postgres" {
		t.Fatalf("DLQDASH_DATABASE_URL is not a postgres:// URL: %v", err)
	}
	if p, _ := u.User.Password(); p != string(pw) || len(pw) < 32 {
		t.Errorf("the URL's password is not postgres_password's (%d characters)", len(pw))
	}
	if u.Hostname() != "postgres" || u.User.Username() != "dlqdash" || u.Path != "/dlqdash" {
		t.Errorf("DLQDASH_DATABASE_URL names %s@%s%s, want dlqdash@postgres/dlqdash as compose.yaml creates it", u.User.Username(), u.Host, u.Path)
	}
	if k := env["DLQDASH_AUDIT_KEY"]; len(k) < 32 {
		t.Errorf("the audit key has %d characters", len(k))
	}
	emuKey := readEnvFile(t, filepath.Join(dir, "emulator.env"))["DLQDASH_EMULATOR_KEY"]
	cs := env["SERVICEBUS_CONNECTION_STRING"]
	if emuKey == "" || !strings.Contains(cs, "Endpoint=sb://emulator;") || !strings.Contains(cs, ";SharedAccessKey="+emuKey+";") {
		t.Errorf("the connection string %q does not reach the emulator with its key", cs)
	}
	// A second run keeps what is there (the key is in use).
	before, _ := os.ReadFile(filepath.Join(dir, "dlqdash.env"))
	if out, err := exec.Command("sh", "compose/init-secrets.sh", dir).CombinedOutput(); err == nil {
		t.Errorf("a second run succeeded: %s", out)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "dlqdash.env"))
	if !bytes.Equal(before, after) {
		t.Errorf("a second run rewrote dlqdash.env")
	}
	// A real namespace's connection string is taken from the environment.
	dir2 := filepath.Join(t.TempDir(), "secrets")
	real := "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=dlqdash;SharedAccessKey=abc="
	cmd = exec.Command("sh", "compose/init-secrets.sh", dir2)
	cmd.Env = append(os.Environ(), "SERVICEBUS_CONNECTION_STRING="+real)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("init-secrets.sh: %v\n%s", err, out)
	}
	if got := readEnvFile(t, filepath.Join(dir2, "dlqdash.env"))["SERVICEBUS_CONNECTION_STRING"]; got != real {
		t.Errorf("the connection string is %q, want the environment's", got)
	}
}

// kube reads every manifest of kubernetes/ by kind and name, and checks
// that kustomization.yaml lists every file.
func kube(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]map[string]any{}
	var listed []string
	for _, f := range files {
		for _, d := range decodeAll(t, f) {
			kind, name := str(d["kind"]), str(at(d, "metadata", "name"))
			if kind == "Kustomization" {
				listed = strs(t, d["resources"])
				continue
			}
			if kind == "" || name == "" || str(d["apiVersion"]) == "" {
				t.Fatalf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			objs[kind+"/"+name] = d
		}
	}
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(listed, b) {
			t.Errorf("kustomization.yaml does not list %s", b)
		}
	}
	return objs
}

func TestKubernetes(t *testing.T) {
	src := readSource(t)
	routes := getRoutes(t)
	objs := kube(t)
	dep := objs["Deployment/dlqdash"]
	if dep == nil {
		t.Fatalf("no Deployment dlqdash in %v", objs)
	}
	if n := at(dep, "spec", "replicas"); n != replicas {
		t.Errorf("the Deployment runs %v replicas, want %d", n, replicas)
	}
	pod := at(dep, "spec", "template")
	labels, _ := at(pod, "metadata", "labels").(map[string]any)
	selects := func(what string, sel any) {
		m, _ := sel.(map[string]any)
		if len(m) == 0 {
			t.Errorf("%s selects nothing", what)
		}
		for k, v := range m {
			if labels[k] != v {
				t.Errorf("%s selects %s=%v, which the pods do not carry", what, k, v)
			}
		}
	}
	selects("the Deployment", at(dep, "spec", "selector", "matchLabels"))

	containers, _ := at(pod, "spec", "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("the pod has %d containers", len(containers))
	}
	c := containers[0]
	args := strs(t, at(c, "args"))
	if len(args) == 0 || args[0] != "serve" {
		t.Errorf("the container runs %v, want serve", args)
	}
	src.checkArgs(t, "deployment.yaml", args)

	// The settings: env names dlqdash reads, no secret among them.
	settings := map[string]string{}
	for _, ef := range at(c, "envFrom").([]any) {
		name := str(at(ef, "configMapRef", "name"))
		cm := objs["ConfigMap/"+name]
		if cm == nil {
			t.Fatalf("envFrom names the ConfigMap %q, which is not in kubernetes/", name)
		}
		for k, v := range cm["data"].(map[string]any) {
			settings[k] = str(v)
			src.checkEnv(t, "ConfigMap "+name, k)
			if slices.Contains(secretEnv, k) {
				t.Errorf("the ConfigMap %s holds the secret %s", name, k)
			}
		}
	}
	// The secrets: every one from the one Secret, none written out.
	secretOf := map[string]string{}
	secrets := map[string]bool{}
	for _, e := range at(c, "env").([]any) {
		name := str(at(e, "name"))
		src.checkEnv(t, "deployment.yaml", name)
		if name == "DLQDASH_REPLICA_ID" {
			// A fixed id would be shared by all three pods; the pod's
			// name survives a container restart, whose new process must
			// not heartbeat its dead predecessor's job claims.
			t.Errorf("the Deployment sets DLQDASH_REPLICA_ID (%v): leave the default, distinct per replica and per start", at(e, "valueFrom"))
		}
		if slices.Contains(secretEnv, name) {
			if at(e, "value") != nil {
				t.Errorf("deployment.yaml writes the secret %s", name)
			}
			ref := at(e, "valueFrom", "secretKeyRef")
			if ref == nil {
				t.Errorf("%s is not from a Secret", name)
				continue
			}
			secrets[str(at(ref, "name"))] = true
			secretOf[name] = str(at(ref, "key"))
		}
	}
	if len(secrets) != 1 {
		t.Errorf("the secrets come from the Secrets %v, want one for every replica", secrets)
	}
	// The README's command creates that Secret with every key.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range secrets {
		create := regexp.MustCompile(`kubectl create secret generic ` + regexp.QuoteMeta(name) + ` \\\n((?:\s+--from-literal=[a-z-]+=.*\n)+)`).FindSubmatch(readme)
		if create == nil {
			t.Errorf("the README does not show how to create the Secret %s", name)
			continue
		}
		for env, key := range secretOf {
			if !strings.Contains(string(create[1]), "--from-literal="+key+"=") {
				t.Errorf("the README's Secret %s has no key %s (for %s)", name, key, env)
			}
		}
	}
	for _, need := range []string{"DLQDASH_DATABASE_URL", "DLQDASH_AUDIT_KEY", "SERVICEBUS_CONNECTION_STRING"} {
		if secretOf[need] == "" {
			t.Errorf("%s is not from the Secret", need)
		}
	}
	for _, alt := range []string{"DLQDASH_DB", "DLQDASH_DATABASE_URL"} {
		if _, inCM := settings[alt]; inCM {
			t.Errorf("the ConfigMap names the database (%s)", alt)
		}
	}
	if settings["DLQDASH_CONFIG"] != "" {
		// The config file is mounted where the variable says.
		mounted := false
		for _, m := range at(c, "volumeMounts").([]any) {
			if strings.HasPrefix(settings["DLQDASH_CONFIG"], str(at(m, "mountPath"))+"/") {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("DLQDASH_CONFIG %s is in no mounted volume", settings["DLQDASH_CONFIG"])
		}
		cfg := objs["ConfigMap/dlqdash-config"]
		var file map[string]any
		if err := yaml.Unmarshal([]byte(str(at(cfg, "data", filepath.Base(settings["DLQDASH_CONFIG"])))), &file); err != nil || at(file, "namespaces", 0, "name") == nil {
			t.Errorf("the config file %s has no namespace: %v", settings["DLQDASH_CONFIG"], err)
		}
		if v := str(at(file, "namespaces", 0, "connection_string_env")); v != "" && secretOf[v] == "" {
			t.Errorf("the config file's namespace reads %s, which is not from the Secret", v)
		}
	}

	// Probes on a real route, on the port dlqdash listens on.
	var httpPort any
	for _, p := range at(c, "ports").([]any) {
		if str(at(p, "name")) == "http" {
			httpPort = at(p, "containerPort")
		}
	}
	if addr := settings["DLQDASH_ADDR"]; httpPort == nil || !strings.HasSuffix(addr, fmt.Sprintf(":%v", httpPort)) {
		t.Errorf("the container port http is %v, DLQDASH_ADDR %q", httpPort, addr)
	}
	for _, probe := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
		path := str(at(c, probe, "httpGet", "path"))
		if !slices.Contains(routes, path) {
			t.Errorf("the %s asks %q, which is not a GET route of web/routes.go", probe, path)
		}
		if port := str(at(c, probe, "httpGet", "port")); port != "http" {
			t.Errorf("the %s asks port %q", probe, port)
		}
	}
	for _, r := range []string{"cpu", "memory"} {
		if at(c, "resources", "requests", r) == nil {
			t.Errorf("the container requests no %s", r)
		}
	}

	// Service and PodDisruptionBudget select the pods; the budget leaves
	// at least one running and lets a drain evict one.
	svc := objs["Service/dlqdash"]
	selects("the Service", at(svc, "spec", "selector"))
	if tp := str(at(svc, "spec", "ports", 0, "targetPort")); tp != "http" {
		t.Errorf("the Service targets port %q", tp)
	}
	pdb := objs["PodDisruptionBudget/dlqdash"]
	selects("the PodDisruptionBudget", at(pdb, "spec", "selector", "matchLabels"))
	min, ok := at(pdb, "spec", "minAvailable").(int)
	if !ok || min < 1 || min >= replicas {
		t.Errorf("the PodDisruptionBudget's minAvailable is %v, want 1 to %d", at(pdb, "spec", "minAvailable"), replicas-1)
	}
	if sa := str(at(pod, "spec", "serviceAccountName")); objs["ServiceAccount/"+sa] == nil {
		t.Errorf("the pods run as the service account %q, which is not in kubernetes/", sa)
	}
	if b := str(at(objs["Ingress/dlqdash"], "spec", "rules", 0, "http", "paths", 0, "backend", "service", "name")); b != "dlqdash" {
		t.Errorf("the Ingress routes to %q", b)
	}
	// No affinity anywhere: any replica serves any request, an OIDC
	// sign-in's callback included (its state is in the database).
	if a := str(at(svc, "spec", "sessionAffinity")); a != "" && a != "None" {
		t.Errorf("the Service has sessionAffinity %s: the replicas need none", a)
	}
	annotations, _ := at(objs["Ingress/dlqdash"], "metadata", "annotations").(map[string]any)
	for k, v := range annotations {
		if strings.Contains(k, "affinity") || strings.Contains(k, "session-cookie") || strings.Contains(k, "upstream-hash-by") {
			t.Errorf("the Ingress pins browsers to a replica (%s: %v): the replicas need no affinity", k, v)
		}
	}
}

// TestDockerfile checks what the deployments rely on in the image: the
// binary as the entrypoint, a health check through a command dlqdash has
// on the port both deployments use, and no database named in the image
// (DLQDASH_DATABASE_URL is refused beside a DLQDASH_DB).
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := os.ReadFile("../cmd/dlqdash/commands.go")
	if err != nil {
		t.Fatal(err)
	}
	hasCommand := func(name string) bool { return bytes.Contains(cmds, []byte(`{"`+name+`", `)) }
	// The run stage: from the last FROM on, continuation lines joined.
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	text = text[strings.LastIndex(text, "\nFROM "):]
	env := map[string]string{}
	var entrypoint, health string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "ENV":
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		case "ENTRYPOINT":
			entrypoint = strings.Join(f[1:], " ")
		case "HEALTHCHECK":
			_, health, _ = strings.Cut(line, " CMD ")
		}
	}
	for _, k := range []string{"DLQDASH_DB", "DLQDASH_DATABASE_URL"} {
		if _, ok := env[k]; ok {
			t.Errorf("the image sets %s: a deployment's DLQDASH_DATABASE_URL would be refused beside DLQDASH_DB", k)
		}
	}
	if env["DLQDASH_ADDR"] != ":8080" {
		t.Errorf("the image's DLQDASH_ADDR is %q; the deployments and the health check expect :8080", env["DLQDASH_ADDR"])
	}
	if entrypoint != `["/dlqdash"]` {
		t.Errorf("the entrypoint is %s; the deployments pass dlqdash's command as arguments", entrypoint)
	}
	if strings.TrimSpace(health) != `["/dlqdash", "healthcheck"]` || !hasCommand("healthcheck") {
		t.Errorf("the health check runs %q", health)
	}
	for _, c := range []string{"serve", "emulator"} {
		if !hasCommand(c) {
			t.Errorf("cmd/dlqdash has no command %s, which the deployments run", c)
		}
	}
}
