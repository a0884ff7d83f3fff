package openapi

import (
	"fmt"
	"os"
	"path/filepath"
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

// Spec file names in the openapi folder; the clients are generated from
// the 3.0 one.
const (
	SpecFile31 = "openapi.yaml"
	SpecFile30 = "openapi-3.0.yaml"
)

// WriteSpec writes Spec's documents into dir as SpecFile31 and SpecFile30.
func WriteSpec(dir string) error {
	v31, v30, err := Spec()
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{SpecFile31: v31, SpecFile30: v30} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("error writing %s: %w", path, err)
		}
	}
	return nil
}
