// Package static embeds the dashboard's CSS and scripts and names each file
// by its content hash, so that browsers may cache it for a year and still
// fetch a new version the moment it changes.
//
// It must not serve HTTP itself: package web does that.
package static
