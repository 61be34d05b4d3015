package credential

import (
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// Kind is how a credential gets its tokens.
type Kind string

const (
	// Default is azidentity's DefaultAzureCredential: the environment
	// (AZURE_CLIENT_ID and friends), workload identity, managed identity,
	// then the Azure CLI and Azure Developer CLI, the first that works.
	Default Kind = "default"
	// ManagedIdentity is the host's managed identity: the system-assigned
	// one, or the user-assigned one whose client id is Spec.ClientID.
	ManagedIdentity Kind = "managed_identity"
	// WorkloadIdentity exchanges a Kubernetes service account token
	// (AZURE_FEDERATED_TOKEN_FILE) for an Entra ID token; the client and
	// tenant ids default to AZURE_CLIENT_ID and AZURE_TENANT_ID.
	WorkloadIdentity Kind = "workload_identity"
	// ClientSecret is an app registration's client secret: Spec.TenantID,
	// Spec.ClientID and Spec.ClientSecret are required.
	ClientSecret Kind = "client_secret"
)

// Spec says which credential to build.
type Spec struct {
	Kind Kind
	// TenantID: required for ClientSecret; overrides AZURE_TENANT_ID for
	// WorkloadIdentity.
	TenantID string
	// ClientID: required for ClientSecret; a user-assigned identity's
	// client id for ManagedIdentity; overrides AZURE_CLIENT_ID for
	// WorkloadIdentity.
	ClientID string
	// ClientSecret is the secret itself, for ClientSecret. Never logged:
	// errors never contain it.
	ClientSecret string
	// ClientOptions configure the credential's HTTP pipeline (the cloud,
	// the transport); the zero value is the Azure public cloud.
	ClientOptions azcore.ClientOptions
	// DisableInstanceDiscovery skips the check of the authority host
	// against Microsoft's list, for an authority it does not know (Azure
	// Stack, a test's token service).
	DisableInstanceDiscovery bool
}

// New builds the credential spec names. It does no I/O.
func New(spec Spec) (azcore.TokenCredential, error) {
	var (
		cred azcore.TokenCredential
		err  error
	)
	switch spec.Kind {
	case Default:
		if spec.TenantID != "" || spec.ClientID != "" || spec.ClientSecret != "" {
			return nil, errors.New("credential default takes no tenant id, client id or secret: it reads AZURE_CLIENT_ID, AZURE_TENANT_ID and the like from the environment")
		}
		cred, err = azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
			ClientOptions:            spec.ClientOptions,
			DisableInstanceDiscovery: spec.DisableInstanceDiscovery,
		})
	case ManagedIdentity:
		if spec.TenantID != "" || spec.ClientSecret != "" {
			return nil, errors.New("credential managed_identity takes only a client id")
		}
		opts := &azidentity.ManagedIdentityCredentialOptions{ClientOptions: spec.ClientOptions}
		if spec.ClientID != "" {
			opts.ID = azidentity.ClientID(spec.ClientID)
		}
		cred, err = azidentity.NewManagedIdentityCredential(opts)
	case WorkloadIdentity:
		if spec.ClientSecret != "" {
			return nil, errors.New("credential workload_identity takes no secret: it reads the service account token from AZURE_FEDERATED_TOKEN_FILE")
		}
		cred, err = azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
			ClientOptions:            spec.ClientOptions,
			ClientID:                 spec.ClientID,
			TenantID:                 spec.TenantID,
			DisableInstanceDiscovery: spec.DisableInstanceDiscovery,
		})
	case ClientSecret:
		switch {
		case spec.TenantID == "":
			return nil, errors.New("credential client_secret needs a tenant id")
		case spec.ClientID == "":
			return nil, errors.New("credential client_secret needs a client id")
		case spec.ClientSecret == "":
			return nil, errors.New("credential client_secret needs the secret")
		}
		cred, err = azidentity.NewClientSecretCredential(spec.TenantID, spec.ClientID, spec.ClientSecret, &azidentity.ClientSecretCredentialOptions{
			ClientOptions:            spec.ClientOptions,
			DisableInstanceDiscovery: spec.DisableInstanceDiscovery,
		})
	default:
		return nil, fmt.Errorf("unknown credential %q: want default, managed_identity, workload_identity or client_secret", spec.Kind)
	}
	if err != nil {
		// azidentity's construction errors name settings (a missing
		// AZURE_FEDERATED_TOKEN_FILE, a malformed tenant id), not secrets.
		return nil, fmt.Errorf("credential %s: %w", spec.Kind, err)
	}
	return cred, nil
}
