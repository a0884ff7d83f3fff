// Package webhook implements the Standard Webhooks contract
// (https://www.standardwebhooks.com) that ax uses to sign result callbacks
// and agentless HTTP jobs. It is the sending side for the server and the
// receiving side for anyone who takes ax's requests (the receiver kit), so
// both ends share one implementation of the same few rules.
//
// # The contract
//
// Every signed request carries three headers:
//
//	webhook-id:        the message id; for a callback, the execution id. It is
//	                   the same on every retry, so it is the receiver's
//	                   idempotency key.
//	webhook-timestamp: the attempt's time in Unix seconds. It changes on every
//	                   attempt and bounds replays.
//	webhook-signature: "v1," followed by the base64 HMAC-SHA256 of
//	                   "<webhook-id>.<webhook-timestamp>.<raw body>", keyed with
//	                   the secret's decoded bytes. While a secret is rotated,
//	                   one signature per valid secret, separated by spaces.
//
// Secrets look like "whsec_" followed by the base64 of 24 to 64 random bytes;
// ax generates 32. A receiver accepts a request when its timestamp is within
// five minutes of its own clock and any v1 signature matches any of its
// secrets (compared in constant time); it then deduplicates on webhook-id.
// The package's receiverdemo folder holds a complete receiver that does so
// in Postgres.
//
// # Checking by hand
//
// The signature needs nothing more than a shell, base64 and openssl:
//
//	secret='whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'
//	id='msg_p5jXN8AQM9LWM0D4loKWxJek'; ts=$(date +%s); body='{"test": 2432232314}'
//	key=$(printf %s "${secret#whsec_}" | base64 -d | od -An -v -tx1 | tr -d ' \n')
//	sig=$(printf '%s.%s.%s' "$id" "$ts" "$body" |
//	    openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | base64)
//	curl -i http://127.0.0.1:8080/callbacks/ax \
//	    -H "webhook-id: $id" -H "webhook-timestamp: $ts" \
//	    -H "webhook-signature: v1,$sig" -H 'content-type: application/json' \
//	    --data-binary "$body"
//
// With ts=1614265330 the signature is
// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=, the reference vector the
// tests check against.
package webhook
