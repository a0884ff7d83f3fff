package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	gojson "github.com/goccy/go-json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/openapi/client"
)

// ClientServer is the ax server reached through the client generated from
// its OpenAPI spec (openapi/client). It translates between the runtime's
// types and the generated ones and maps answers onto the Server contract;
// it is the only file of the agent that knows the generated client.
type ClientServer struct {
	api *client.ClientWithResponses
}

// callTimeout bounds one protocol call; the lease long poll gets its wait on
// top. Deadlines are per call rather than on the http.Client so that the long
// poll and the short calls share one connection pool.
const callTimeout = 30 * time.Second

// errMalformed marks calls that cannot be made because the runtime holds
// data the protocol does not accept (ids that are not UUIDs): trying again
// will not help.
var errMalformed = errors.New("malformed protocol data")

// serverConns is how many idle connections to the server an agent keeps:
// its lease poll, a results report, a heartbeat, a log shipment and a
// release can all be in flight at once. Go's default transport keeps 2
// per host, so the third call's connection was closed after every
// request and dialed again (over TLS, its handshake redone); with 200
// agents in one process sharing that transport, dialing was 8 % of the
// benchmark process's CPU in BenchmarkManyAgents (pprof).
const serverConns = 8

// NewClientServer returns the server at baseURL (e.g.
// http://127.0.0.1:8080). httpClient defaults to a client of its own
// transport that keeps serverConns connections open; it should have no
// overall Timeout, since the lease long poll takes up to 25 s by design.
func NewClientServer(baseURL string, httpClient *http.Client) (*ClientServer, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q is not an absolute http(s) URL", baseURL)
	}
	if httpClient == nil {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxIdleConnsPerHost = serverConns
		httpClient = &http.Client{Transport: transport}
	}
	api, err := client.NewClientWithResponses(strings.TrimRight(baseURL, "/"), client.WithHTTPClient(httpClient))
	if err != nil {
		return nil, fmt.Errorf("error creating the API client: %w", err)
	}
	return &ClientServer{api: api}, nil
}

// Register implements Server.
func (c *ClientServer) Register(ctx context.Context, key string, reg Registration) (Credentials, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body := client.AgentRegistration{Name: reg.Name, Capacity: int64(reg.Capacity), Version: &reg.Version}
	if len(reg.Labels) > 0 {
		body.Labels = &reg.Labels
	}
	if reg.HostName != "" {
		body.HostName = &reg.HostName
	}
	if reg.HostIP != "" {
		body.HostIp = &reg.HostIP
	}
	if reg.Weight > 0 {
		weight := int64(reg.Weight)
		body.Weight = &weight
	}
	if len(reg.Executors) > 0 {
		kinds := make([]client.AgentRegistrationExecutors, len(reg.Executors))
		for i, k := range reg.Executors {
			kinds[i] = client.AgentRegistrationExecutors(k)
		}
		body.Executors = &kinds
	}
	resp, err := c.api.RegisterAgentWithResponse(ctx, body, bearer(key))
	if err := check("register", resp, err); err != nil {
		var se *StatusError
		if errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			return Credentials{}, fmt.Errorf("bootstrap key: %w: %w", ErrUnauthorized, se)
		}
		return Credentials{}, err
	}
	creds := resp.JSON201
	if creds == nil {
		return Credentials{}, fmt.Errorf("register: server answered %d without credentials", resp.StatusCode())
	}
	return Credentials{AgentID: creds.AgentId.String(), Token: creds.Token,
		LeaseSeconds: int(creds.LeaseSeconds), HeartbeatIntervalSeconds: int(creds.HeartbeatIntervalSeconds)}, nil
}

// Declare implements Declarer.
func (c *ClientServer) Declare(ctx context.Context, key string, d Declaration) (DeclarationReport, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body, err := json.Marshal(d)
	if err != nil {
		return DeclarationReport{}, fmt.Errorf("%w: %w", errMalformed, err)
	}
	resp, err := c.api.DeclareJobsWithBodyWithResponse(ctx, "application/json", bytes.NewReader(body), bearer(key))
	if err := check("declare", resp, err); err != nil {
		return DeclarationReport{}, err
	}
	var report DeclarationReport
	if err := json.Unmarshal(resp.Body, &report); err != nil {
		return DeclarationReport{}, fmt.Errorf("error decoding the declaration report: %w", err)
	}
	return report, nil
}

// Lease implements Server.
func (c *ClientServer) Lease(ctx context.Context, s Session, req LeaseRequest) ([]LeasedTask, error) {
	id, err := agentID(s)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(req.WaitSeconds)*time.Second+callTimeout)
	defer cancel()
	wait := int64(req.WaitSeconds)
	// The raw call, decoded once into our own type: the generated response
	// type would decode the body a second time (a fifth of the agent's CPU
	// at high rates) and hold params as interface{}, turning large
	// integers into float64 and changing what the task sees.
	httpResp, err := c.api.LeaseTasks(ctx, id, client.LeaseRequest{Max: int64(req.Max), WaitSeconds: &wait}, bearer(s.Token))
	var resp rawAnswer
	if err == nil {
		resp, err = readAnswer(httpResp)
	}
	if err := checkAgent("lease", resp, err); err != nil {
		return nil, err
	}
	var out struct {
		Tasks []LeasedTask `json:"tasks"`
	}
	if err := gojson.Unmarshal(resp.body, &out); err != nil {
		return nil, fmt.Errorf("error decoding leased tasks: %w", err)
	}
	return out.Tasks, nil
}

// rawAnswer is an HTTP answer read whole, for calls decoded by hand.
type rawAnswer struct {
	code int
	body []byte
}

func (r rawAnswer) StatusCode() int { return r.code }
func (r rawAnswer) GetBody() []byte { return r.body }

func readAnswer(resp *http.Response) (rawAnswer, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return rawAnswer{}, fmt.Errorf("error reading the answer: %w", err)
	}
	return rawAnswer{code: resp.StatusCode, body: body}, nil
}

// Heartbeat implements Server.
func (c *ClientServer) Heartbeat(ctx context.Context, s Session, hb Heartbeat) (HeartbeatReply, error) {
	id, err := agentID(s)
	if err != nil {
		return HeartbeatReply{}, err
	}
	refs, err := clientRefs(hb.Tasks)
	if err != nil {
		return HeartbeatReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	body := client.AgentHeartbeat{Tasks: &refs, Running: int64(hb.Running), Cpu: &hb.CPU, Load1: &hb.Load1,
		Memory: &hb.Memory, DiskFreeBytes: hb.DiskFreeBytes, Ready: &hb.Ready}
	resp, err := c.api.HeartbeatAgentWithResponse(ctx, id, body, bearer(s.Token))
	if err := checkAgent("heartbeat", resp, err); err != nil {
		return HeartbeatReply{}, err
	}
	r := resp.JSON200
	if r == nil {
		return HeartbeatReply{}, fmt.Errorf("heartbeat: server answered %d without a reply", resp.StatusCode())
	}
	return HeartbeatReply{Renewed: deref(r.Renewed), Lost: deref(r.Lost), Cancel: deref(r.Cancel),
		LeaseExpiresAt: r.LeaseExpiresAt, State: string(r.State)}, nil
}

// Complete implements Server. The server answers 409 with a problem
// document when every result was a conflict; that becomes one conflict
// outcome per result, so the caller has a single path.
func (c *ClientServer) Complete(ctx context.Context, s Session, results []TaskResult) ([]ResultOutcome, error) {
	out, err := c.complete(ctx, s, results)
	if refusesErrorCodes(err) && slices.ContainsFunc(results, func(r TaskResult) bool { return r.ErrorCode != "" }) {
		// A server older than error codes refuses the field as unknown:
		// the results matter more than their codes, so they go again
		// without them (and an invalid code, which the agent never sends,
		// cannot lose a batch either).
		return c.complete(ctx, s, withoutErrorCodes(results))
	}
	return out, err
}

// refusesErrorCodes says whether err is a 422 naming a result's error_code.
func refusesErrorCodes(err error) bool {
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnprocessableEntity {
		return false
	}
	return slices.ContainsFunc(se.Problem.Errors, func(e ProblemError) bool {
		return strings.HasSuffix(e.Location, ".error_code")
	})
}

func withoutErrorCodes(results []TaskResult) []TaskResult {
	out := slices.Clone(results)
	for i := range out {
		out[i].ErrorCode = ""
	}
	return out
}

func (c *ClientServer) complete(ctx context.Context, s Session, results []TaskResult) ([]ResultOutcome, error) {
	id, err := agentID(s)
	if err != nil {
		return nil, err
	}
	body, err := clientResults(results)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.api.CompleteTasksWithResponse(ctx, id, client.CompleteRequest{Results: &body}, bearer(s.Token))
	err = checkAgent("complete", resp, err)
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusConflict {
		return allConflicts(results), nil
	}
	if err != nil {
		return nil, err
	}
	if resp.JSON200 == nil {
		return nil, fmt.Errorf("complete: server answered %d without outcomes", resp.StatusCode())
	}
	var out []ResultOutcome
	for _, o := range deref(resp.JSON200.Results) {
		out = append(out, ResultOutcome{TaskID: o.TaskId.String(), Status: string(o.Status)})
	}
	return out, nil
}

// Logs implements Server.
func (c *ClientServer) Logs(ctx context.Context, s Session, chunks []LogChunk) error {
	id, err := agentID(s)
	if err != nil {
		return err
	}
	body := make([]client.LogChunk, len(chunks))
	for i, ch := range chunks {
		ref, err := clientRef(TaskRef{TaskID: ch.TaskID, LeaseToken: ch.LeaseToken})
		if err != nil {
			return err
		}
		body[i] = client.LogChunk{TaskId: ref.TaskId, LeaseToken: ref.LeaseToken,
			Stream: client.LogChunkStream(ch.Stream), Data: storableText(ch.Data)}
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.api.AppendTaskLogsWithResponse(ctx, id, client.LogRequest{Chunks: &body}, bearer(s.Token))
	return checkAgent("logs", resp, err)
}

// Release implements Server.
func (c *ClientServer) Release(ctx context.Context, s Session, tasks []TaskRef) error {
	id, err := agentID(s)
	if err != nil {
		return err
	}
	refs, err := clientRefs(tasks)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.api.ReleaseTasksWithResponse(ctx, id, client.ReleaseRequest{Tasks: &refs}, bearer(s.Token))
	return checkAgent("release", resp, err)
}

// Drain implements Server.
func (c *ClientServer) Drain(ctx context.Context, s Session) error {
	id, err := agentID(s)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.api.DrainAgentWithResponse(ctx, id, bearer(s.Token))
	return checkAgent("drain", resp, err)
}

// Deregister implements Server.
func (c *ClientServer) Deregister(ctx context.Context, s Session) error {
	id, err := agentID(s)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.api.DeregisterAgentWithResponse(ctx, id, bearer(s.Token))
	return checkAgent("deregister", resp, err)
}

// answer is what every generated response offers.
type answer interface {
	StatusCode() int
	GetBody() []byte
}

// check turns a generated call's outcome into the Server contract: a
// transport error stays a plain (retryable) error, an answer outside 2xx
// becomes a *StatusError with the server's problem document.
func check(op string, resp answer, err error) error {
	if err != nil {
		return fmt.Errorf("error calling %s: %w", op, err)
	}
	if code := resp.StatusCode(); code < 200 || code > 299 {
		return fmt.Errorf("%s: %w", op, problemError(code, resp.GetBody()))
	}
	return nil
}

// checkAgent is check for calls of a registered agent. 401 (token refused)
// and 404 (the server answers "agent not found: register again") both mean
// the session is gone, so both become ErrUnauthorized.
func checkAgent(op string, resp answer, err error) error {
	err = check(op, resp, err)
	var se *StatusError
	if errors.As(err, &se) && (se.Code == http.StatusUnauthorized || se.Code == http.StatusNotFound) {
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	return err
}

// problemError keeps the problem document, or the start of whatever body a
// proxy sent instead, so that logs say why.
func problemError(code int, body []byte) *StatusError {
	se := &StatusError{Code: code}
	if json.Unmarshal(body, &se.Problem) != nil || (se.Problem.Title == "" && se.Problem.Detail == "") {
		se.Problem = Problem{Detail: strings.TrimSpace(string(truncateBytes(body, 500)))}
	}
	return se
}

func bearer(token string) client.RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

func agentID(s Session) (uuid.UUID, error) {
	id, err := uuid.Parse(s.AgentID)
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: agent id %q is not a UUID", errMalformed, s.AgentID)
	}
	return id, nil
}

func clientRef(r TaskRef) (client.TaskRef, error) {
	id, err1 := uuid.Parse(r.TaskID)
	token, err2 := uuid.Parse(r.LeaseToken)
	if err1 != nil || err2 != nil {
		return client.TaskRef{}, fmt.Errorf("%w: task %q or its lease token %q is not a UUID", errMalformed, r.TaskID, r.LeaseToken)
	}
	return client.TaskRef{TaskId: id, LeaseToken: token}, nil
}

// clientRefs converts refs; none is [] rather than null, as the schema wants
// an array.
func clientRefs(refs []TaskRef) ([]client.TaskRef, error) {
	out := make([]client.TaskRef, len(refs))
	for i, r := range refs {
		var err error
		if out[i], err = clientRef(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func clientResults(results []TaskResult) ([]client.TaskResult, error) {
	out := make([]client.TaskResult, len(results))
	for i, r := range results {
		ref, err := clientRef(TaskRef{TaskID: r.TaskID, LeaseToken: r.LeaseToken})
		if err != nil {
			return nil, err
		}
		out[i] = client.TaskResult{TaskId: ref.TaskId, LeaseToken: ref.LeaseToken, State: client.TaskResultState(r.State)}
		if len(r.Result) > 0 { // a typed nil in the interface would be sent as null
			out[i].Result = r.Result
		}
		if r.Error != "" {
			text := storableText(r.Error)
			out[i].Error = &text
		}
		if r.ErrorCode != "" {
			out[i].ErrorCode = &r.ErrorCode
		}
	}
	return out, nil
}

func allConflicts(results []TaskResult) []ResultOutcome {
	out := make([]ResultOutcome, len(results))
	for i, r := range results {
		out[i] = ResultOutcome{TaskID: r.TaskID, Status: OutcomeConflict}
	}
	return out
}

func deref[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

func truncateBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
