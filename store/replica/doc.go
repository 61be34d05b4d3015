// Package replica holds the primitives that let several dlqdash replicas
// share one PostgreSQL database, each with its engine-specific SQL:
//
//   - leases with a term (Acquire, Renew, Release, Fence, and Lease, which
//     campaigns and runs a role's work while it holds it): one ingester per
//     namespace, and a write fenced with a stale term refused by the
//     database itself;
//   - job claims (Claims): FOR UPDATE SKIP LOCKED with a heartbeat, a job
//     whose replica went silent adopted by another, and claim terms fencing
//     the old claimer's writes the same way;
//   - wake-ups (Notify, Listener): LISTEN/NOTIFY as a signal only, the data
//     read from the tables, so a missed notification loses nothing;
//   - LockChain: an advisory lock serialising the appends of one chain (the
//     audit trail).
//
// Every time that decides who holds what is the database's clock (now());
// a replica's own clock only decides when it gives up early. The package
// owns the leases table (Schema); the jobs table whose rows Claims hands out
// belongs to the store. It knows nothing of Service Bus, HTTP or the
// catalog, and it must not grow SQL of the store's own tables.
package replica
