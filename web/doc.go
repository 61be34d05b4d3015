// Package web is dlqdash's HTTP side: the one route table (routes.go),
// handlers that return errors, the adapters that answer them (handler.go)
// with the one error classifier (errors.go), middleware applied in plain
// sight, and static files.
//
// Handlers read input, call one domain operation and render a views
// component. They must not run SQL, call the broker, or build HTML strings.
// A page and its API endpoint share the function that does the work
// (readMessages, readJobs, readGroups, ...) and differ only in rendering.
//
// The JSON API under /api/v1 (api*.go, docs/api.md) follows the same shape: its
// handlers return errors, which serveAPIError (errors.go) turns into
// {"error": {...}} answers from the same classification as the error
// pages, and its objects come from package apijson, which `dlqdash export`
// shares so the two cannot drift apart. The message filter is dlq.Filter,
// read and written by dlq in every form (query, form, JSON, flags).
//
// Live updates: the Hub receives the catalog's changes through Publish,
// which never blocks, and pushes server-rendered fragments to the pages'
// websockets (GET /live, live.go). Its parts: subscriptions by page
// (live_subscription.go, views.LivePage), connections (hub_registry.go),
// coalescing (hub_batch.go), the fan-out (hub.go), the wire format and
// rendering (hub_wire.go), each page's fragments (hub_fragments.go,
// hub_jobs.go). A connection that cannot keep up is closed rather than waited
// for; its page reconnects and refetches itself (static/live.js). The
// replay engine's job changes arrive through PublishJob (hub_jobs.go),
// which never blocks either and coalesces per job.
//
// Sign-in (perm.go, signin.go): every route in the table declares its
// permission (public, viewer, operator, admin, or bodies); the identify
// middleware puts the request's identity (an API token, a trusted proxy's
// headers, or a session cookie; package auth checks them) in its context,
// and each route's check answers 401/403 (JSON) or redirects to sign-in
// and shows the 403 page, auditing refusals. GET /login and GET
// /auth/callback run the OpenID Connect sign-in through Config.SignIn;
// POST /logout ends the session.
//
// Replays without script (replays.go, jobs.go): a selection POSTs to
// /replays, which renders the engine's dry run and the job's options; that
// form POSTs to /jobs, which submits and redirects (303) to the job's page,
// or re-renders with what the engine refused and the API's status. Job
// controls are POSTs that redirect back. Without an engine (Config.Jobs
// nil) these pages answer 404 and the selection's buttons are disabled.
package web
