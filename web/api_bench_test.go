package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlqdash/dlqdash/store"
	"github.com/dlqdash/dlqdash/store/storetest"
)

// The memory a dashboard needs to serve a catalog of a million messages,
// measured on a separate process (so that building the catalog does not
// count): the test binary runs itself as TestServeHelperProcess, serving
// the catalog with the real server and store, while the benchmark sends it a
// mix of API requests from several clients and then reads its resident set
// size from /proc. Run it with
//
//	go test -run '^$' -bench ServeRSS -benchtime 2000x ./web
//
// The target is an RSS of at most 150 MB.

const serveHelperEnv = "DLQDASH_TEST_SERVE_DB"

// TestServeHelperProcess is not a test: it is the serving process of
// BenchmarkServeRSS, and skips unless that benchmark started it.
func TestServeHelperProcess(t *testing.T) {
	path := os.Getenv(serveHelperEnv)
	if path == "" {
		t.Skip("the serving process of BenchmarkServeRSS")
	}
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	srv := New(Config{Catalog: st, Mode: "serve"})
	fmt.Println("addr", ln.Addr().String())
	go srv.Serve(ln)
	// Serve until the benchmark closes stdin.
	io.Copy(io.Discard, os.Stdin)
	srv.Shutdown(context.Background())
	st.Close()
	os.Exit(0)
}

func BenchmarkServeRSS(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc")
	}
	path := storetest.Catalog(b, 1_000_000)
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), serveHelperEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "addr ") {
		b.Fatalf("serving process said %q, %v", line, err)
	}
	base := "http://" + strings.TrimSpace(strings.TrimPrefix(line, "addr ")) + "/api/v1/"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	get := func(u string) (map[string]any, error) {
		res, err := client.Get(u)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var v map[string]any
		if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
			return nil, err
		}
		if res.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %d %v", u, res.StatusCode, v)
		}
		return v, nil
	}
	rss := func() (cur, peak float64) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseFloat(f[1], 64)
			switch f[0] {
			case "VmRSS:":
				cur = kb / 1024
			case "VmHWM:":
				peak = kb / 1024
			}
		}
		return cur, peak
	}
	idle, _ := rss()

	gs, err := get(base + "groups")
	if err != nil {
		b.Fatal(err)
	}
	groups := gs["groups"].([]any)
	group := groups[0].(map[string]any)["id"].(string)
	queries := []string{
		"", "include_gone=true", "entity=" + storetest.BigEntity, "entity=" + storetest.SmallEntity,
		"subqueue=transfer_dead_letter", "state=deferred", "reason=SqlTimeout", "group=" + group,
		"since=2026-11-04T00:00:00Z&until=2026-11-05T00:00:00Z", "property=region%3D" + storetest.CommonRegion,
		"property=tenant%3D" + storetest.RareTenant, "q=" + storetest.CommonWord, "q=" + storetest.MidWord,
		"q=" + storetest.RareWord, "entity=email&q=" + storetest.CommonWord, "limit=500",
	}
	// Every client follows each list a few pages deep, and opens messages
	// and bodies on the way.
	var (
		mu  sync.Mutex
		lat []time.Duration
	)
	timed := func(u string) (map[string]any, error) {
		start := time.Now()
		v, err := get(u)
		d := time.Since(start)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		return v, err
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for i := range work {
				q := queries[i%len(queries)]
				u := base + "messages?" + q
				v, err := timed(u)
				for page := 0; err == nil && page < 3; page++ {
					next, _ := v["next_cursor"].(string)
					msgs, _ := v["messages"].([]any)
					if len(msgs) > 0 {
						id := msgs[len(msgs)/2].(map[string]any)["id"].(string)
						if _, err = timed(base + "messages/" + id); err != nil {
							break
						}
						res, gerr := client.Get(base + "messages/" + id + "/body")
						if gerr != nil {
							err = gerr
							break
						}
						io.Copy(io.Discard, res.Body)
						res.Body.Close()
					}
					if next == "" {
						break
					}
					v, err = timed(u + "&cursor=" + url.QueryEscape(next))
				}
				if err == nil && i%10 == 0 {
					_, err = timed(base + "entities")
					if err == nil {
						_, err = timed(base + "groups")
					}
				}
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	for i := 0; i < b.N; i++ {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			b.Fatal(err)
		}
	}
	close(work)
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	cur, peak := rss()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)].Microseconds()) / 1000
	}
	b.ReportMetric(idle, "idle-rss-MB")
	b.ReportMetric(cur, "rss-MB")
	b.ReportMetric(peak, "peak-rss-MB")
	b.ReportMetric(float64(len(lat)), "requests")
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
}
