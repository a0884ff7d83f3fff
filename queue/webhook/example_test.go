package webhook_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/queue/webhook"
)

// The sender's side: sign a request's body and set the three headers.
func ExampleSign() {
	secret, err := webhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		log.Fatal(err)
	}
	body := `{"test": 2432232314}`
	req, err := http.NewRequest(http.MethodPost, "https://receiver.example/callbacks/ax", strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	sentAt := time.Unix(1614265330, 0)
	if err := webhook.Sign(req.Header, "msg_p5jXN8AQM9LWM0D4loKWxJek", sentAt, []byte(body), secret); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{webhook.HeaderID, webhook.HeaderTimestamp, webhook.HeaderSignature} {
		fmt.Printf("%s: %s\n", name, req.Header.Get(name))
	}
	// Output:
	// webhook-id: msg_p5jXN8AQM9LWM0D4loKWxJek
	// webhook-timestamp: 1614265330
	// webhook-signature: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}

// The receiver's side: check the signature before anything else, then use
// the message id to process each message once (see the receiverdemo folder
// for a complete receiver that does so in Postgres).
func ExampleVerifier_Middleware() {
	// During a rotation, WEBHOOK_SECRETS holds the old and the new secret.
	secrets, err := webhook.ParseSecrets(strings.Fields(os.Getenv("WEBHOOK_SECRETS"))...)
	if err != nil {
		log.Fatal(err)
	}
	verifier := &webhook.Verifier{Secrets: secrets}
	http.Handle("POST /callbacks/ax", verifier.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg, _ := webhook.MessageFromContext(r.Context())
		body, _ := io.ReadAll(r.Body) // the verified bytes
		log.Printf("message %s sent at %s: %s", msg.ID, msg.Timestamp, body)
		w.WriteHeader(http.StatusNoContent)
	})))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", nil))
}
