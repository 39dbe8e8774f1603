// Package auditfile is the embedded domain.ToolAuditLog: the stored audit
// stream of tool calls as append-only JSON-lines files under the home, one
// per UTC day, read newest first.
//
// Layout under its directory (<home>/audit/tools, 0700; files 0600):
//
//	<YYYY-MM-DD>.jsonl   one line per record of that UTC day (its At):
//	                     {"id", "at", "callId", "tool", …}
//
// id is 16 random hex digits the store draws, so a page's Next
// (domain.ListKey of At and id) names one record even when call ids
// repeat. A line is written with one write(2) on a descriptor opened with
// O_APPEND, and kept at most 4,096 bytes (PIPE_BUF; longer string fields
// are cut to 512 bytes first, a line still longer is refused): any number
// of goroutines and processes sharing the home append without a lock and
// never interleave within a line, on a local file system. A reader takes
// only lines ended by their newline, so a line being written is not read
// half. The file of a day is read once and then only its new tail (it is
// append-only), for a few days at a time.
//
// Records older than the retention are never returned, and Sweep deletes
// the files of days wholly older than it.
//
// It must never hold an argument, a result or an error message: it
// stores the domain.ToolAudit it is given, which has none, and it must
// never return a record of another tenant than the query's scope.
package auditfile

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
)

const (
	dayLayout = "2006-01-02"
	suffix    = ".jsonl"
	// maxLine is PIPE_BUF on Linux and macOS: the most one append writes.
	maxLine = 4096
	// maxField bounds each string field of a stored record.
	maxField = 512
	// cachedDays bounds the days whose records a Log keeps parsed.
	cachedDays = 8
)

// Log is the audit stream in one directory. It is safe for concurrent
// use, and any number of Logs (processes) may share the directory.
type Log struct {
	dir       string
	retention time.Duration
	now       func() time.Time
	// c is shared by the Logs WithRetention derives.
	c *cache
}

// cache keeps the parsed records of the days read last.
type cache struct {
	mu   sync.Mutex
	days map[string]*day
}

// day is one file read so far: its records sorted by list key (newest
// first) and the offset after the last whole line.
type day struct {
	offset     int64
	recs       []stored
	unreadable []error
	used       time.Time
}

// stored is a record as a line holds it.
type stored struct {
	ID string `json:"id"`
	domain.ToolAudit
}

func (s stored) key() string { return domain.ListKey(s.At, s.ID) }

// New returns the log in dir, which it creates at the first append,
// keeping records for retention (≤ 0: domain.DefaultToolAuditRetention).
func New(dir string, retention time.Duration) *Log {
	if retention <= 0 {
		retention = domain.DefaultToolAuditRetention
	}
	return &Log{dir: dir, retention: retention, now: time.Now, c: &cache{days: map[string]*day{}}}
}

// WithRetention is the same log keeping records for d.
func (l *Log) WithRetention(d time.Duration) domain.ToolAuditLog {
	c := *l
	if d > 0 {
		c.retention = d
	}
	return &c
}

// SetClock makes the log read the time from now (tests).
func (l *Log) SetClock(now func() time.Time) { l.now = now }

// Dir is where the log keeps its files.
func (l *Log) Dir() string { return l.dir }

// AppendToolAudit appends r to the file of its UTC day.
func (l *Log) AppendToolAudit(ctx context.Context, r domain.ToolAudit) error {
	if r.At.IsZero() {
		return fmt.Errorf("auditfile: append: %w: the record has no time", domain.ErrInvalidID)
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("auditfile: append: %w", err)
	}
	s := stored{ID: hex.EncodeToString(id[:]), ToolAudit: cut(r)}
	s.At = s.At.UTC()
	line, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("auditfile: append: %w", err)
	}
	line = append(line, '\n')
	if len(line) > maxLine {
		return fmt.Errorf("auditfile: append: the record takes %d bytes, more than one append writes whole (%d)", len(line), maxLine)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("auditfile: append: %w", err)
	}
	path := filepath.Join(l.dir, s.At.Format(dayLayout)+suffix)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(l.dir, 0o700); err == nil {
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		}
	}
	if err != nil {
		return fmt.Errorf("auditfile: append: %w", err)
	}
	_, werr := f.Write(line)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("auditfile: append to %s: %w", filepath.Base(path), werr)
	}
	return nil
}

// cut bounds the string fields so that a line fits one append.
func cut(r domain.ToolAudit) domain.ToolAudit {
	for _, p := range []*string{&r.CallID, &r.Tool, &r.AgentID, &r.Principal, &r.Tenant, &r.Transport, &r.Via, &r.Status, &r.ErrorCode, &r.ArgsHash} {
		if len(*p) > maxField {
			s := (*p)[:maxField]
			for len(s) > 0 && !utf8.ValidString(s) {
				s = s[:len(s)-1]
			}
			*p = s
		}
	}
	return r
}

// QueryToolAudit reads one page of the scope's records, newest first,
// from the newest day back to the retention.
func (l *Log) QueryToolAudit(ctx context.Context, q domain.ToolAuditQuery) (domain.ToolAuditPage, error) {
	limit, err := domain.PageLimit(q.Limit)
	if err != nil {
		return domain.ToolAuditPage{}, fmt.Errorf("auditfile: query: %w", err)
	}
	if q.After != "" {
		if _, _, err := domain.ParseListKey(q.After); err != nil {
			return domain.ToolAuditPage{}, fmt.Errorf("auditfile: query: %w", err)
		}
	}
	now := l.now()
	cutoff := now.Add(-l.retention)
	names, err := l.days(cutoff)
	if err != nil {
		return domain.ToolAuditPage{}, fmt.Errorf("auditfile: query: %w", err)
	}
	var page domain.ToolAuditPage
	last := "" // the list key of the page's last record
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return domain.ToolAuditPage{}, fmt.Errorf("auditfile: query: %w", err)
		}
		if q.After != "" {
			// A day newer than the cursor's holds nothing after it: every
			// key of the day sorts before its start's with "~" for id.
			if domain.ListKey(dayStart(name), "")+"~" < q.After {
				continue
			}
		}
		recs, bad, err := l.read(name)
		if err != nil {
			return domain.ToolAuditPage{}, fmt.Errorf("auditfile: query: %w", err)
		}
		page.Unreadable = append(page.Unreadable, bad...)
		i := 0
		if q.After != "" {
			i, _ = slices.BinarySearchFunc(recs, q.After, func(s stored, k string) int { return strings.Compare(s.key(), k) })
			if i < len(recs) && recs[i].key() == q.After {
				i++
			}
		}
		for _, s := range recs[i:] {
			if s.At.Before(cutoff) {
				return page, nil // every later record is older still
			}
			if !(q.AnyTenant || s.Tenant == q.Tenant) || (q.Tool != "" && s.Tool != q.Tool) || (q.Status != "" && s.Status != q.Status) {
				continue
			}
			if len(page.Records) == limit {
				page.Next = last
				return page, nil
			}
			page.Records = append(page.Records, s.ToolAudit)
			last = s.key()
		}
	}
	return page, nil
}

// days lists the day files not wholly older than cutoff, newest first.
func (l *Log) days(cutoff time.Time) ([]string, error) {
	ents, err := os.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		t, err := time.Parse(dayLayout, name)
		if err != nil || !t.Add(24*time.Hour).After(cutoff) {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	slices.Reverse(names)
	return names, nil
}

func dayStart(name string) time.Time {
	t, _ := time.Parse(dayLayout, name)
	return t
}

// read returns the day's records, newest first, reading only what was
// appended since the last read.
func (l *Log) read(name string) ([]stored, []error, error) {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.days[name]
	if d == nil {
		d = &day{}
	}
	f, err := os.Open(filepath.Join(l.dir, name+suffix))
	if errors.Is(err, os.ErrNotExist) {
		delete(c.days, name)
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() < d.offset {
		d = &day{} // replaced (removed and written again): read it anew
	}
	if st.Size() > d.offset {
		if _, err := f.Seek(d.offset, io.SeekStart); err != nil {
			return nil, nil, err
		}
		added, err := d.tail(bufio.NewReaderSize(f, 64<<10), name)
		if err != nil {
			return nil, nil, err
		}
		if added {
			slices.SortFunc(d.recs, func(a, b stored) int { return cmp.Compare(a.key(), b.key()) })
		}
	}
	d.used = time.Now()
	c.days[name] = d
	if len(c.days) > cachedDays {
		c.evict()
	}
	return d.recs, d.unreadable, nil
}

// tail parses the whole lines after d.offset.
func (d *day) tail(r *bufio.Reader, name string) (bool, error) {
	added := false
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return added, nil // a line without its newline is still being written
		}
		if err != nil {
			return added, err
		}
		at := d.offset
		d.offset += int64(len(line))
		var s stored
		if derr := json.Unmarshal(bytes.TrimSpace(line), &s); derr != nil || s.At.IsZero() || !validID(s.ID) {
			if len(d.unreadable) < 10 {
				d.unreadable = append(d.unreadable, fmt.Errorf("auditfile: %s%s at byte %d: %w: not a record", name, suffix, at, domain.ErrCorrupt))
			}
			continue
		}
		d.recs = append(d.recs, s)
		added = true
	}
}

func validID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

// evict drops the day used least recently.
func (c *cache) evict() {
	var oldest string
	for name, d := range c.days {
		if oldest == "" || d.used.Before(c.days[oldest].used) {
			oldest = name
		}
	}
	delete(c.days, oldest)
}

// Sweep deletes the files of the days wholly older than the retention
// and returns how many.
func (l *Log) Sweep(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(l.dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("auditfile: sweep: %w", err)
	}
	cutoff := l.now().Add(-l.retention)
	n := 0
	var errs []error
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), suffix)
		if !ok {
			continue
		}
		t, err := time.Parse(dayLayout, name)
		if err != nil || t.Add(24*time.Hour).After(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(l.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
		l.c.mu.Lock()
		delete(l.c.days, name)
		l.c.mu.Unlock()
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("auditfile: sweep: %w", err)
	}
	return n, nil
}

var _ domain.ToolAuditLog = (*Log)(nil)
