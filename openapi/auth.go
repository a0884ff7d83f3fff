package openapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// Scopes an API key can carry (queue.KeyService stores them). admin may
// do everything; submit may also read (a submitter needs the results);
// read and agent grant only themselves.
const (
	ScopeAdmin  = queue.ScopeAdmin
	ScopeSubmit = queue.ScopeSubmit
	ScopeRead   = queue.ScopeRead
	ScopeAgent  = queue.ScopeAgent
)

const (
	securitySchemeName = "bearer"
	scopeMetadataKey   = "ax-scope"
	// scopeExtension names the scope an operation needs in the spec.
	scopeExtension = "x-ax-scope"
)

// requireScope marks op as needing scope, both for the middleware and in
// the spec.
func requireScope(op huma.Operation, scope string) huma.Operation {
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[scopeMetadataKey] = scope
	// An HTTP bearer scheme has no scopes in OpenAPI (linters refuse a
	// list there): the scope is the extension x-ax-scope and a sentence.
	op.Security = []map[string][]string{{securitySchemeName: {}}}
	if op.Extensions == nil {
		op.Extensions = map[string]any{}
	}
	op.Extensions[scopeExtension] = scope
	op.Description = strings.TrimSpace(op.Description + " Needs an API key with scope `" + scope + "`.")
	op.Errors = append(op.Errors, http.StatusUnauthorized, http.StatusForbidden)
	return op
}

// Grants reports whether a key with scopes may call an operation that
// requires scope. The web console (openapi/console) asks it which actions
// to show; the API decides again when they are posted.
func Grants(scopes []string, scope string) bool {
	return slices.Contains(scopes, ScopeAdmin) || slices.Contains(scopes, scope) ||
		(scope == ScopeRead && slices.Contains(scopes, ScopeSubmit))
}

type authenticator struct {
	keys    *queue.KeyService
	signing *queue.SigningKeyService
	api     huma.API
	logger  *slog.Logger
	cache   keyCache
	turns   *fairTurns // nil: calls run as they come
}

type principalKey struct{}

// WithPrincipal returns ctx carrying key as the caller of an in-process
// API request (the console's, for a visitor whose session it checked):
// the API then skips the Authorization header but still checks key's
// scopes and groups. No client can put a key in a context.
func WithPrincipal(ctx context.Context, key *axtype.APIKey) context.Context {
	return context.WithValue(ctx, principalKey{}, key)
}

func (a *authenticator) middleware(ctx huma.Context, next func(huma.Context)) {
	scope, _ := ctx.Operation().Metadata[scopeMetadataKey].(string)
	if scope == "" {
		next(ctx)
		return
	}
	if key, ok := ctx.Context().Value(principalKey{}).(*axtype.APIKey); ok {
		// A call the API makes on itself for an authenticated request (a
		// PATCH's GET and PUT): no client can put a key in a context.
		a.authorize(ctx, key, scope, next)
		return
	}
	secret, ok := bearer(ctx.Header("Authorization"))
	if !ok && ctx.Header(HeaderSignature) != "" {
		a.signed(ctx, scope, next)
		return
	}
	if !ok {
		a.deny(ctx, http.StatusUnauthorized, "missing API key: send the header `Authorization: Bearer <key>`")
		return
	}
	hash := sha256.Sum256([]byte(secret))
	key, err := a.cache.authenticate(ctx.Context(), a.keys, hash)
	switch {
	case errors.Is(err, axtype.ErrNotFound):
		a.deny(ctx, http.StatusUnauthorized, "unknown or revoked API key")
		return
	case err != nil:
		a.logger.ErrorContext(ctx.Context(), "error authenticating", "error", err)
		a.deny(ctx, http.StatusServiceUnavailable, "cannot check the API key right now")
		return
	}
	a.authorize(ctx, key, scope, next)
}

// authorize passes the request on with key as principal when key has
// scope, and answers 403 otherwise.
func (a *authenticator) authorize(ctx huma.Context, key *axtype.APIKey, scope string, next func(huma.Context)) {
	if !Grants(key.Scopes, scope) {
		a.deny(ctx, http.StatusForbidden, "API key "+key.Name+" lacks scope "+scope+" (it has "+strings.Join(key.Scopes, ", ")+")")
		return
	}
	ctx = huma.WithValue(ctx, principalKey{}, key)
	if a.turns != nil {
		ctx = huma.WithValue(ctx, fairTurnsKey{}, a.turns)
	}
	next(ctx)
}

func (a *authenticator) deny(ctx huma.Context, status int, msg string) {
	if status == http.StatusUnauthorized {
		ctx.SetHeader("WWW-Authenticate", `Bearer realm="ax"`)
	}
	_ = huma.WriteErr(a.api, ctx, status, msg)
}

func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// protect serves h, at path outside huma, to callers with a key (bearer or
// signed) that has scope.
func (a *authenticator) protect(scope, path string, h http.Handler) http.Handler {
	op := &huma.Operation{OperationID: strings.Trim(path, "/"), Method: http.MethodGet, Path: path,
		Metadata: map[string]any{scopeMetadataKey: scope}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.middleware(humago.NewContext(op, r, w), func(huma.Context) { h.ServeHTTP(w, r) })
	})
}
