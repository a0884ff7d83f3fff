package openapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
)

// SecretRotation asks for a new signing secret.
type SecretRotation struct {
	PreviousValidSeconds *int `json:"previous_valid_seconds,omitempty" minimum:"0" maximum:"604800" doc:"How long the old secret keeps signing alongside the new one (both signatures are sent); default 86400, 0 drops it now"`
}

// RotatedSecret is a job's new signing secret, shown once.
type RotatedSecret struct {
	SigningSecret      string     `json:"signing_secret" doc:"The new whsec_ secret: give it to the receivers"`
	PreviousValidUntil *time.Time `json:"previous_valid_until,omitempty" doc:"Until when the old secret still signs"`
}

type rotateInput struct {
	ID   string          `path:"id" format:"uuid" doc:"Job id"`
	Body *SecretRotation `required:"false"`
}

type rotateOutput struct {
	Body RotatedSecret
}

func (h *outboundHandlers) registerSecretRotation(api huma.API) {
	register(api, showsSecret(requireScope(huma.Operation{
		OperationID: "rotate-signing-secret", Method: http.MethodPost, Path: "/v1/jobs/{id}/signing-secret/rotate",
		Tags: []string{"Jobs"}, Summary: "Rotate a job's signing secret",
		Description: "Makes a new whsec_ secret (shown in this answer only) sign the job's callbacks and HTTP requests. " +
			"The old one keeps signing alongside for previous_valid_seconds, so receivers can add the new secret, " +
			"then drop the old one, without losing a message.",
		Errors: []int{http.StatusNotFound},
	}, ScopeSubmit), "signing_secret"), h.rotateSecret)
}

func (h *outboundHandlers) rotateSecret(ctx context.Context, in *rotateInput) (*rotateOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	overlap := queue.DefaultSecretOverlap
	if in.Body != nil && in.Body.PreviousValidSeconds != nil {
		overlap = time.Duration(*in.Body.PreviousValidSeconds) * time.Second
	}
	secret, until, err := h.jobs.RotateSecret(ctx, id, overlap)
	if err != nil {
		return nil, jobError(err, nil)
	}
	return &rotateOutput{Body: RotatedSecret{SigningSecret: secret, PreviousValidUntil: until}}, nil
}
