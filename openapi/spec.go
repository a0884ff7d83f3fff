package openapi

import (
	"fmt"
)

// SpecVersion is the API's version in the OpenAPI document. It changes
// with the API, not with each build, so the committed spec stays stable.
const SpecVersion = "1.0.0"

// Spec returns the OpenAPI 3.1 document and its 3.0.3 downgrade (for
// generators such as oapi-codegen that do not read 3.1 yet), as YAML.
func Spec() (v31, v30 []byte, err error) {
	_, api := New(Config{})
	if v31, err = api.OpenAPI().YAML(); err != nil {
		return nil, nil, fmt.Errorf("error rendering OpenAPI 3.1: %w", err)
	}
	// OpenAPI 3.0 has no webhooks; the 3.0 document is for client
	// generators, which do not need the callback.
	v30doc := *api.OpenAPI()
	v30doc.Webhooks = nil
	if v30, err = v30doc.DowngradeYAML(); err != nil {
		return nil, nil, fmt.Errorf("error rendering OpenAPI 3.0: %w", err)
	}
	return v31, v30, nil
}
