package server

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const apiVersionsKey = 18

// apiVersionsDefaultMax is the highest ApiVersions version answered when the
// handler does not list key 18 itself.
const apiVersionsDefaultMax = 4

// apiVersions is the immutable table of advertised keys and versions, with
// the ApiVersions responses pre-encoded (they never change).
type apiVersions struct {
	keys []kmsg.ApiVersionsResponseApiKey // sorted by key
	// byKey[k] is the range for key k; ok false when not advertised.
	byKey []versionRange
	// responses[v] is the pre-encoded ApiVersions response at version v.
	responses []Response
	// unsupported is the v0 response carrying UNSUPPORTED_VERSION and the
	// keys, sent when a client asks for an ApiVersions version we do not know.
	unsupported Response
}

type versionRange struct {
	min, max int16
	ok       bool
}

// newAPIVersions checks the advertised list and encodes the responses;
// tags go into the flexible versions (v3+).
func newAPIVersions(list []kmsg.ApiVersionsResponseApiKey, tags kmsg.Tags, newRequest func(int16) kmsg.Request) (*apiVersions, error) {
	keys := slices.Clone(list)
	if !slices.ContainsFunc(keys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == apiVersionsKey }) {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: apiVersionsKey, MinVersion: 0, MaxVersion: apiVersionsDefaultMax})
	}
	slices.SortFunc(keys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	a := &apiVersions{keys: keys, byKey: make([]versionRange, int(keys[len(keys)-1].ApiKey)+1)}
	for i, k := range keys {
		if i > 0 && keys[i-1].ApiKey == k.ApiKey {
			return nil, fmt.Errorf("server: api key %d listed twice", k.ApiKey)
		}
		req := newRequest(k.ApiKey)
		if req == nil {
			return nil, fmt.Errorf("server: api key %d unknown to kmsg and to the handler", k.ApiKey)
		}
		if k.MinVersion < 0 || k.MinVersion > k.MaxVersion || k.MaxVersion > req.MaxVersion() {
			return nil, fmt.Errorf("server: %s versions %d..%d invalid (kmsg knows 0..%d)",
				kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, req.MaxVersion())
		}
		a.byKey[k.ApiKey] = versionRange{min: k.MinVersion, max: k.MaxVersion, ok: true}
	}
	av := a.byKey[apiVersionsKey]
	encode := func(version, errorCode int16) Response {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(version)
		resp.ErrorCode = errorCode
		resp.ApiKeys = keys
		if resp.IsFlexible() {
			resp.UnknownTags = tags
		}
		// ApiVersions responses always use the v0 response header, so the
		// header is never flexible even when the body is.
		return Response{Parts: []Part{{Bytes: resp.AppendTo(nil)}}}
	}
	a.responses = make([]Response, av.max+1)
	for v := av.min; v <= av.max; v++ {
		a.responses[v] = encode(v, 0)
	}
	a.unsupported = encode(0, kerr.UnsupportedVersion.Code)
	return a, nil
}

func (a *apiVersions) supports(key, version int16) bool {
	if key < 0 || int(key) >= len(a.byKey) {
		return false
	}
	r := a.byKey[key]
	return r.ok && version >= r.min && version <= r.max
}

// response returns the reply to an ApiVersions request at version: the
// list at that version, or the v0 UNSUPPORTED_VERSION answer (KIP-511: the
// client then retries with the highest version the list names).
func (a *apiVersions) response(version int16) Response {
	if a.supports(apiVersionsKey, version) {
		return a.responses[version]
	}
	return a.unsupported
}
