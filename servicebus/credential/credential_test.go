package credential_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/dlqdash/dlqdash/servicebus/credential"
)

// clearAzureEnv unsets the variables azidentity reads, for the test.
func clearAzureEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"AZURE_TOKEN_CREDENTIALS", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET",
		"AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "AZURE_PASSWORD", "AZURE_AUTHORITY_HOST"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
}

func TestNewBuildsEachKind(t *testing.T) {
	clearAzureEnv(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("service-account-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		env   map[string]string
		spec  credential.Spec
		check func(azcore.TokenCredential) bool
	}{
		{"default", nil, credential.Spec{Kind: credential.Default},
			func(c azcore.TokenCredential) bool { _, ok := c.(*azidentity.DefaultAzureCredential); return ok }},
		{"system-assigned managed identity", nil, credential.Spec{Kind: credential.ManagedIdentity},
			func(c azcore.TokenCredential) bool { _, ok := c.(*azidentity.ManagedIdentityCredential); return ok }},
		{"user-assigned managed identity", nil, credential.Spec{Kind: credential.ManagedIdentity, ClientID: "11111111-1111-1111-1111-111111111111"},
			func(c azcore.TokenCredential) bool { _, ok := c.(*azidentity.ManagedIdentityCredential); return ok }},
		{"workload identity from the environment", map[string]string{"AZURE_FEDERATED_TOKEN_FILE": tokenFile, "AZURE_CLIENT_ID": "c", "AZURE_TENANT_ID": "t"},
			credential.Spec{Kind: credential.WorkloadIdentity},
			func(c azcore.TokenCredential) bool { _, ok := c.(*azidentity.WorkloadIdentityCredential); return ok }},
		{"workload identity with ids from the spec", map[string]string{"AZURE_FEDERATED_TOKEN_FILE": tokenFile},
			credential.Spec{Kind: credential.WorkloadIdentity, ClientID: "c", TenantID: "t"},
			func(c azcore.TokenCredential) bool { _, ok := c.(*azidentity.WorkloadIdentityCredential); return ok }},
		{"client secret", nil, credential.Spec{Kind: credential.ClientSecret, TenantID: "t", ClientID: "c", ClientSecret: "s"},
			func(c azcore.TokenCredential) bool { _, ok := c.(*azidentity.ClientSecretCredential); return ok }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			c, err := credential.New(tt.spec)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if !tt.check(c) {
				t.Errorf("New built a %T", c)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	clearAzureEnv(t)
	tests := []struct {
		name string
		spec credential.Spec
		want string
	}{
		{"unknown kind", credential.Spec{Kind: "emulator"}, `unknown credential "emulator"`},
		{"default with a client id", credential.Spec{Kind: credential.Default, ClientID: "c"}, "credential default takes no tenant id"},
		{"managed identity with a secret", credential.Spec{Kind: credential.ManagedIdentity, ClientSecret: "s"}, "takes only a client id"},
		{"workload identity without its token file", credential.Spec{Kind: credential.WorkloadIdentity, ClientID: "c", TenantID: "t"}, "credential workload_identity: "},
		{"client secret without tenant", credential.Spec{Kind: credential.ClientSecret, ClientID: "c", ClientSecret: "s"}, "needs a tenant id"},
		{"client secret without client", credential.Spec{Kind: credential.ClientSecret, TenantID: "t", ClientSecret: "s"}, "needs a client id"},
		{"client secret without secret", credential.Spec{Kind: credential.ClientSecret, TenantID: "t", ClientID: "c"}, "needs the secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := credential.New(tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// fakeTokenService is an Entra ID token endpoint on loopback TLS: it answers
// the tenant's OpenID configuration and client-credential token requests,
// and records the forms it was sent.
type fakeTokenService struct {
	srv   *httptest.Server
	mu    sync.Mutex
	forms []map[string]string
}

func newFakeTokenService(t *testing.T) *fakeTokenService {
	f := &fakeTokenService{}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		tenant, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		switch {
		case rest == "v2.0/.well-known/openid-configuration":
			base := f.srv.URL + "/" + tenant
			json.NewEncoder(w).Encode(map[string]string{
				"token_endpoint":         base + "/oauth2/v2.0/token",
				"authorization_endpoint": base + "/oauth2/v2.0/authorize",
				"issuer":                 base + "/v2.0",
			})
		case rest == "oauth2/v2.0/token" && r.Method == http.MethodPost:
			if err := r.ParseForm(); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			form := map[string]string{"tenant": tenant}
			for k := range r.PostForm {
				form[k] = r.PostForm.Get(k)
			}
			f.mu.Lock()
			f.forms = append(f.forms, form)
			f.mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": 3600, "access_token": "token-for-" + form["client_id"]})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeTokenService) clientOptions() azcore.ClientOptions {
	return azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: f.srv.URL + "/"}, Transport: f.srv.Client()}
}

// The client secret in the Spec is the one sent to the token service, for
// the tenant and client in the Spec, and the token asked for is Service
// Bus's.
func TestClientSecretSendsItsSecret(t *testing.T) {
	clearAzureEnv(t)
	sts := newFakeTokenService(t)
	c, err := credential.New(credential.Spec{Kind: credential.ClientSecret, TenantID: "contoso-tenant", ClientID: "dlqdash-app", ClientSecret: "s3cr3t",
		ClientOptions: sts.clientOptions(), DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{"https://servicebus.azure.net//.default"}})
	if err != nil {
		t.Fatalf("GetToken: %v", err)
	}
	if tok.Token != "token-for-dlqdash-app" {
		t.Errorf("token = %q", tok.Token)
	}
	sts.mu.Lock()
	defer sts.mu.Unlock()
	if len(sts.forms) != 1 {
		t.Fatalf("%d token requests, want 1", len(sts.forms))
	}
	got := sts.forms[0]
	if got["tenant"] != "contoso-tenant" || got["client_id"] != "dlqdash-app" || got["client_secret"] != "s3cr3t" ||
		got["grant_type"] != "client_credentials" || !strings.Contains(got["scope"], "https://servicebus.azure.net//.default") {
		t.Errorf("token request = %v", got)
	}
}
