package openapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// APIKey describes a stored key; its secret is shown once, when it is
// created, and never stored.
type APIKey struct {
	ID         uuid.UUID           `json:"id" readOnly:"true"`
	Name       string              `json:"name" example:"dashboard" doc:"What the key is for"`
	Prefix     string              `json:"prefix" readOnly:"true" example:"ax_3kT9vQ2x" doc:"First characters of the secret, to tell keys apart"`
	Scopes     []string            `json:"scopes" example:"[\"read\"]"`
	Labels     map[string][]string `json:"labels,omitempty" doc:"Agent keys: the only labels their agents may declare"`
	Groups     []string            `json:"groups,omitempty" doc:"The job groups the key is limited to; absent: all"`
	MintedBy   *uuid.UUID          `json:"minted_by,omitempty" readOnly:"true" doc:"The key that registered the agent this key is the token of"`
	CreatedAt  time.Time           `json:"created_at" readOnly:"true"`
	LastUsedAt *time.Time          `json:"last_used_at,omitempty" readOnly:"true"`
	RevokedAt  *time.Time          `json:"revoked_at,omitempty" readOnly:"true"`
}

// KeyCreateRequest describes a new key.
type KeyCreateRequest struct {
	Name   string              `json:"name,omitempty" maxLength:"200" example:"dashboard" doc:"What the key is for (default: key-<scopes>)"`
	Scopes []string            `json:"scopes" minItems:"1" maxItems:"4" uniqueItems:"true" enum:"admin,submit,read,agent" example:"[\"read\"]"`
	Labels map[string][]string `json:"labels,omitempty" maxProperties:"100" doc:"Agent keys only: the labels (each with its allowed values) their agents may declare; absent: any"`
	Groups []string            `json:"groups,omitempty" minItems:"1" maxItems:"100" doc:"Limit the key to the jobs and runs of these job groups (not for admin keys); absent: all"`
}

// CreatedKey is a new key with its secret, shown this once.
type CreatedKey struct {
	APIKey
	Secret string `json:"secret" doc:"The key itself: send it as Authorization: Bearer <secret>. Shown once."`
}

// CreatedSigningKey is a key for HMAC-signed requests acting for an API key.
type CreatedSigningKey struct {
	ID       uuid.UUID `json:"id" doc:"Send it as Ax-Key-Id"`
	APIKeyID uuid.UUID `json:"api_key_id" doc:"The API key it acts for"`
	Secret   string    `json:"secret" doc:"The HMAC secret. Shown once."`
}

type keyHandlers struct {
	keys    *queue.KeyService
	signing *queue.SigningKeyService
	// forgetKeys drops this replica's cached keys once one is revoked.
	forgetKeys func()
}

type keyCreateInput struct {
	Body KeyCreateRequest
}

type keyIDInput struct {
	ID string `path:"id" format:"uuid" doc:"API key id"`
}

type keyCreatedOutput struct {
	Body *CreatedKey
}

type keyListInput struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Page size"`
	Cursor string `query:"cursor" maxLength:"100" doc:"next_cursor of the previous page"`
}

type keyListOutput struct {
	Body struct {
		Keys       []*APIKey `json:"keys"`
		NextCursor string    `json:"next_cursor,omitempty" doc:"Pass as cursor to get the next page; absent on the last page"`
	}
}

type signingKeyOutput struct {
	Body *CreatedSigningKey
}

// register adds the key operations: only admin keys manage keys (an admin
// key cannot be limited to groups, so no limited key mints a wider one).
func (h *keyHandlers) register(api huma.API) {
	tags := []string{"Keys"}
	register(api, showsSecret(requireScope(huma.Operation{
		OperationID: "create-key", Method: http.MethodPost, Path: "/v1/keys", Tags: tags,
		Summary: "Create an API key", DefaultStatus: http.StatusCreated,
		Description: "Stores a new key with its scopes and limits and answers its secret.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, ScopeAdmin), "secret"), h.create)
	register(api, requireScope(huma.Operation{
		OperationID: "list-keys", Method: http.MethodGet, Path: "/v1/keys", Tags: tags,
		Summary: "List API keys", Description: "One page of keys, revoked ones included, oldest first; secrets are never shown. Each agent registration mints a key (its token), kept until the agent is pruned (see the history guide).",
	}, ScopeAdmin), h.list)
	register(api, requireScope(huma.Operation{
		OperationID: "revoke-key", Method: http.MethodPost, Path: "/v1/keys/{id}/revoke", Tags: tags,
		Summary: "Revoke an API key", DefaultStatus: http.StatusNoContent,
		Description: "The key stops working on every replica at once, and so do the agent tokens it minted.",
		Errors:      []int{http.StatusNotFound},
	}, ScopeAdmin), h.revoke)
	register(api, showsSecret(requireScope(huma.Operation{
		OperationID: "create-signing-key", Method: http.MethodPost, Path: "/v1/keys/{id}/signing-keys", Tags: tags,
		Summary: "Create a signing key", DefaultStatus: http.StatusCreated,
		Description: "A secret for HMAC-signed requests (headers Ax-Key-Id, Ax-Timestamp, Ax-Nonce, Ax-Signature) acting for the API key.",
		Errors:      []int{http.StatusNotFound},
	}, ScopeAdmin), "secret"), h.createSigning)
}

func (h *keyHandlers) create(ctx context.Context, in *keyCreateInput) (*keyCreatedOutput, error) {
	req := in.Body
	if req.Name == "" {
		req.Name = "key-" + strings.Join(req.Scopes, ",")
	}
	secret, key, err := h.keys.Create(ctx, req.Name, req.Scopes, queue.KeyLimits{Labels: req.Labels, Groups: req.Groups})
	var invalid *queue.KeyLimitsError
	if errors.As(err, &invalid) {
		return nil, huma.Error422UnprocessableEntity("invalid key limits",
			&huma.ErrorDetail{Location: "body." + invalid.Field, Message: invalid.Message})
	}
	if err != nil {
		return nil, err
	}
	return &keyCreatedOutput{Body: &CreatedKey{APIKey: *keyFromDB(key), Secret: secret}}, nil
}

func (h *keyHandlers) list(ctx context.Context, in *keyListInput) (*keyListOutput, error) {
	var after *uuid.UUID
	if in.Cursor != "" {
		id, err := decodeCursor(in.Cursor)
		if err != nil {
			return nil, invalidCursor(in.Cursor)
		}
		after = &id
	}
	keys, err := h.keys.List(ctx, after, in.Limit+1)
	if errors.Is(err, axtype.ErrNotFound) { // the cursor's key
		return nil, invalidCursor(in.Cursor)
	}
	if err != nil {
		return nil, err
	}
	out := &keyListOutput{}
	if len(keys) > in.Limit {
		keys = keys[:in.Limit]
		out.Body.NextCursor = encodeCursor(keys[len(keys)-1].ID)
	}
	out.Body.Keys = make([]*APIKey, len(keys))
	for i, k := range keys {
		out.Body.Keys[i] = keyFromDB(k)
	}
	return out, nil
}

func (h *keyHandlers) revoke(ctx context.Context, in *keyIDInput) (*struct{}, error) {
	id, err := uuid.Parse(in.ID)
	if err != nil {
		return nil, huma.Error422UnprocessableEntity("invalid key id", &huma.ErrorDetail{Location: "path.id", Value: in.ID, Message: "is not a UUID"})
	}
	if err := h.keys.Revoke(ctx, id); errors.Is(err, axtype.ErrNotFound) {
		return nil, huma.Error404NotFound("no live API key has this id")
	} else if err != nil {
		return nil, err
	}
	h.forgetKeys()
	return nil, nil
}

func (h *keyHandlers) createSigning(ctx context.Context, in *keyIDInput) (*signingKeyOutput, error) {
	apiKeyID, err := uuid.Parse(in.ID)
	if err != nil {
		return nil, huma.Error422UnprocessableEntity("invalid key id", &huma.ErrorDetail{Location: "path.id", Value: in.ID, Message: "is not a UUID"})
	}
	id, secret, err := h.signing.Create(ctx, apiKeyID)
	var fk *axtype.ConstraintError
	if errors.As(err, &fk) {
		return nil, huma.Error404NotFound("no API key has this id")
	}
	if err != nil {
		return nil, err
	}
	return &signingKeyOutput{Body: &CreatedSigningKey{ID: id, APIKeyID: apiKeyID, Secret: secret}}, nil
}

func keyFromDB(k *axtype.APIKey) *APIKey {
	return &APIKey{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Scopes: k.Scopes, Labels: k.Labels, Groups: k.Groups,
		MintedBy: k.MintedBy, CreatedAt: k.CreatedAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt}
}
