package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// DocumentStore is the entry point: one per application and database. It
// holds the conventions, the request executor (topology, failover, HTTP
// cache) and the HiLo id generators shared by all its sessions. It is safe
// for concurrent use.
type DocumentStore struct {
	// Conventions may be changed until the store's first operation.
	Conventions *Conventions

	urls     []string
	https    bool // the URLs are https (mixing schemes is refused)
	database string
	urlErr   error

	initOnce   sync.Once
	conv       *Conventions
	types      *typeCache
	executor   *RequestExecutor
	serverExec *RequestExecutor
	hilo       *hiloIDs

	hiloRequests atomic.Int64
	closed       atomic.Bool
	closeOnce    sync.Once
	closeErr     error
}

// NewDocumentStore returns a store for database on the given server URLs
// (tried in order until one returns the topology). It does no I/O.
func NewDocumentStore(urls []string, database string) *DocumentStore {
	return NewDocumentStoreWithConventions(urls, database, nil)
}

// NewDocumentStoreWithConventions is NewDocumentStore with conventions
// (nil for the defaults; unset fields get their defaults).
func NewDocumentStoreWithConventions(urls []string, database string, conv *Conventions) *DocumentStore {
	s := &DocumentStore{database: database, Conventions: conv}
	if s.Conventions == nil {
		s.Conventions = DefaultConventions()
	}
	scheme := ""
	for _, u := range urls {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if u == "" {
			continue
		}
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			s.urlErr = fmt.Errorf("rookery: invalid server URL %q", u)
			continue
		}
		if scheme != "" && pu.Scheme != scheme {
			s.urlErr = errors.New("rookery: server URLs mix http and https")
		}
		scheme = pu.Scheme
		s.urls = append(s.urls, u)
	}
	s.https = scheme == "https"
	if len(s.urls) == 0 && s.urlErr == nil {
		s.urlErr = errors.New("rookery: no server URL given")
	}
	return s
}

// Database is the store's database name.
func (s *DocumentStore) Database() string { return s.database }

// URLs are the server URLs the store was created with.
func (s *DocumentStore) URLs() []string { return append([]string(nil), s.urls...) }

func (s *DocumentStore) init() error {
	s.initOnce.Do(func() {
		s.conv = s.Conventions.withDefaults()
		if s.conv.Certificate != nil && s.urlErr == nil && !s.https {
			// As RavenDB's clients: a certificate means a secured cluster,
			// which is never spoken to in clear text.
			s.urlErr = fmt.Errorf("rookery: the URL %s is http, but a client certificate is set (Conventions.Certificate): a secured cluster needs https URLs", s.urls[0])
		}
		s.types = &typeCache{conv: s.conv}
		s.executor = newRequestExecutor(s.database, s.urls, s.conv)
		s.serverExec = newRequestExecutor("", s.urls, s.conv)
		s.hilo = &hiloIDs{sep: s.conv.IdentityPartsSeparator, fetch: serverRangeFetcher(s.executor, &s.hiloRequests)}
	})
	if s.urlErr != nil {
		return s.urlErr
	}
	if s.closed.Load() {
		return ErrStoreClosed
	}
	return nil
}

// RequestExecutor returns the executor used for the store's database.
func (s *DocumentStore) RequestExecutor() *RequestExecutor {
	_ = s.init()
	return s.executor
}

// ServerRequestExecutor returns the executor used for server-wide
// operations (creating and deleting databases).
func (s *DocumentStore) ServerRequestExecutor() *RequestExecutor {
	_ = s.init()
	return s.serverExec
}

// HiLoRequests is the number of GET hilo/next requests the store has made.
func (s *DocumentStore) HiLoRequests() int64 { return s.hiloRequests.Load() }

// GenerateID returns a new HiLo id for an id prefix (HiLo tag), e.g.
// GenerateID(ctx, "orders") → "orders/1-A".
func (s *DocumentStore) GenerateID(ctx context.Context, tag string) (string, error) {
	if err := s.init(); err != nil {
		return "", err
	}
	return s.hilo.generator(tag).nextID(ctx)
}

// GenerateDocumentID returns a new HiLo id for an entity (a pointer to a
// struct), using the collection and prefix conventions. It does not set the
// entity's id field.
func (s *DocumentStore) GenerateDocumentID(ctx context.Context, entity any) (string, error) {
	if err := s.init(); err != nil {
		return "", err
	}
	t := reflect.TypeOf(entity)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "", errors.New("rookery: nil entity")
	}
	ti := s.types.get(t)
	if ti.tag == "" {
		return "", fmt.Errorf("rookery: type %s has no collection", t)
	}
	return s.hilo.generator(ti.tag).nextID(ctx)
}

// CollectionName returns the collection of an entity, or "" for none.
func (s *DocumentStore) CollectionName(entity any) string {
	_ = s.init()
	t := reflect.TypeOf(entity)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	return s.types.get(t).collection
}

// OpenSession opens a unit of work with the store's default options.
func (s *DocumentStore) OpenSession() *Session {
	_ = s.init()
	return s.OpenSessionWithOptions(SessionOptions{UseOptimisticConcurrency: s.conv.UseOptimisticConcurrency})
}

// OpenSessionWithOptions opens a unit of work with the given options.
func (s *DocumentStore) OpenSessionWithOptions(opts SessionOptions) *Session {
	_ = s.init()
	return newSession(s, opts)
}

// Close returns the unused part of every HiLo range to the server (waiting
// at most Conventions.CloseTimeout for those requests) and releases idle
// connections. Later operations fail with ErrStoreClosed. Close may be
// called more than once.
func (s *DocumentStore) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.hilo == nil || s.executor == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.conv.CloseTimeout)
		defer cancel()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		s.hilo.gens.Range(func(k, v any) bool {
			tag, g := k.(string), v.(*hiloGenerator)
			end, last, ok := g.returnInfo()
			if !ok {
				return true
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.executor.execute(ctx, &request{
					method:   http.MethodPut,
					path:     "/hilo/return",
					query:    "tag=" + url.QueryEscape(tag) + "&end=" + strconv.FormatInt(end, 10) + "&last=" + strconv.FormatInt(last, 10),
					dbScoped: true,
				})
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
			return true
		})
		wg.Wait()
		s.executor.close()
		s.serverExec.close()
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
