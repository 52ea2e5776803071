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

// produceAdvertisedMin is the lowest Produce version ApiVersions
// advertises, whatever the lowest version the handler serves. Kafka 4
// serves Produce from v3 (KIP-896) but advertises it from v0, and mq does
// the same: librdkafka (kcat, confluent-kafka) compresses with gzip,
// snappy and lz4 only when the broker lists Produce v0, and otherwise logs
// "Broker does not support compression type" and sends its batches
// uncompressed (KAFKA-18659, librdkafka issue 4956). Clients pick the
// highest version both sides know, so none sends the versions below the
// served minimum; a request at one has its connection closed, which is
// also what Kafka 4 answers (its socket server refuses the version before
// any handler sees it).
const produceAdvertisedMin = 0

// apiVersions is the immutable table of served and advertised keys and
// versions, with the ApiVersions responses pre-encoded (they never change).
type apiVersions struct {
	keys []kmsg.ApiVersionsResponseApiKey // advertised, sorted by key
	// byKey[k] is the range of key k served (which is the range advertised
	// but for Produce's minimum); ok false when not served.
	byKey []versionRange
	// responses[v] is the pre-encoded ApiVersions response at version v.
	responses []Response
	// unsupported is the v0 response carrying UNSUPPORTED_VERSION and
	// ApiVersions' own versions only, sent when a client asks for an
	// ApiVersions version we do not know (KIP-511, as Kafka answers): the
	// client asks again at the highest version named, and learns the
	// rest (the features of v3+ among them) from that answer.
	unsupported Response
}

type versionRange struct {
	min, max int16
	ok       bool
}

// newAPIVersions checks the advertised list and encodes the responses;
// tags and features go into the flexible versions (v3+).
func newAPIVersions(list []kmsg.ApiVersionsResponseApiKey, tags kmsg.Tags, features Features, newRequest func(int16) kmsg.Request) (*apiVersions, error) {
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
		if k.ApiKey == produceKey {
			keys[i].MinVersion = min(k.MinVersion, produceAdvertisedMin)
		}
	}
	av := a.byKey[apiVersionsKey]
	encode := func(version, errorCode int16, keys []kmsg.ApiVersionsResponseApiKey) Response {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.SetVersion(version)
		resp.ErrorCode = errorCode
		resp.ApiKeys = keys
		if resp.IsFlexible() {
			resp.UnknownTags = tags
			resp.SupportedFeatures = features.Supported
			if len(features.Finalized) > 0 {
				resp.FinalizedFeaturesEpoch, resp.FinalizedFeatures = features.FinalizedEpoch, features.Finalized
			}
		}
		// ApiVersions responses always use the v0 response header, so the
		// header is never flexible even when the body is.
		return Response{Parts: []Part{{Bytes: resp.AppendTo(nil)}}}
	}
	a.responses = make([]Response, av.max+1)
	for v := av.min; v <= av.max; v++ {
		a.responses[v] = encode(v, 0, keys)
	}
	a.unsupported = encode(0, kerr.UnsupportedVersion.Code,
		[]kmsg.ApiVersionsResponseApiKey{{ApiKey: apiVersionsKey, MinVersion: av.min, MaxVersion: av.max}})
	return a, nil
}

// supports reports whether version of key is served.
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
