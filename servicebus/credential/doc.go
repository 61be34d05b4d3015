// Package credential builds the Microsoft Entra ID token credentials dlqdash
// signs in to Service Bus with, from a Spec that names the kind (default,
// managed identity, workload identity, client secret) and its few settings.
//
// It is the only importer of azidentity. Building a credential does no I/O:
// tokens are fetched by the Service Bus clients when they first need one,
// so a wrong setting shows up as that namespace's error, not as a failed
// start. Secrets arrive in the Spec already read (from the environment or
// a file); nothing here reads configuration.
package credential
