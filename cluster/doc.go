// Package cluster is how one replica of dlqdash shares its work with the
// others on one database, behind small interfaces, so that the same wiring
// runs a replica alone on SQLite and several on PostgreSQL:
//
//   - Leases: who runs a role, such as the ingester of a namespace
//     ("ingest/" + namespace). Solo holds every lease at once (one replica:
//     SQLite); Postgres campaigns for them with store/replica's leases,
//     whose term fences the holder's writes.
//   - Ingester: a namespace's dlq.Ingester that runs only while this
//     replica holds the namespace's lease, writing through a catalog fenced
//     with the lease's term, and reports the namespace's freshness (and who
//     ingests it) while another replica does.
//   - JobClaims: replay.Claims on the jobs table (FOR UPDATE SKIP LOCKED and
//     a heartbeat; store/replica.Claims).
//   - Notifier and store/replica.Listener: wake-ups between replicas
//     (LISTEN/NOTIFY). They carry no data: what changed is read from the
//     tables, so a lost notification loses nothing.
//
// docs/architecture.md (Replicas) says what runs where and why.
package cluster
