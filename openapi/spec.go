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
	if v30, err = api.OpenAPI().DowngradeYAML(); err != nil {
		return nil, nil, fmt.Errorf("error rendering OpenAPI 3.0: %w", err)
	}
	return v31, v30, nil
}
