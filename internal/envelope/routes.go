package envelope

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// EnvProviderQueues is the variable that names the providers' own work
// queues: "provider=queueURL" pairs, comma-separated
// ("ses=https://sqs.eu-west-1.amazonaws.com/123456789012/nudge-prod-work-ses").
// NUDGE_QUEUE_URL stays the default work queue.
const EnvProviderQueues = "NUDGE_PROVIDER_QUEUES"

// Routes says which work queue a delivery's message goes to: its
// provider's own queue when it has one (every provider but the stage's
// default one: deployment.Stage.ProviderQueues), else the default work
// queue. Every producer of a delivery's message routes by it: the
// enqueue's hand-off and repair, the consumer's deferrals and forwards,
// the redrive.
type Routes struct {
	// Default is the work queue of the providers that have no queue of
	// their own. Required.
	Default string
	// ByProvider are the providers' own queues, by provider.
	ByProvider map[string]string
}

// ParseRoutes reads the default work queue and the value of
// EnvProviderQueues ("" for none).
func ParseRoutes(defaultURL, providerQueues string) (Routes, error) {
	r := Routes{Default: defaultURL, ByProvider: map[string]string{}}
	if defaultURL == "" {
		return r, fmt.Errorf("envelope: no default work queue; set NUDGE_QUEUE_URL")
	}
	for _, pair := range strings.Split(providerQueues, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, url, ok := strings.Cut(pair, "=")
		name, url = strings.TrimSpace(name), strings.TrimSpace(url)
		switch {
		case !ok || name == "" || url == "":
			return r, fmt.Errorf("envelope: %s: %q is not provider=queueURL; write e.g. ses=https://sqs.REGION.amazonaws.com/ACCOUNT/QUEUE, pairs separated by commas",
				EnvProviderQueues, pair)
		case r.ByProvider[name] != "":
			return r, fmt.Errorf("envelope: %s names provider %q twice; give each provider one queue", EnvProviderQueues, name)
		case url == defaultURL:
			return r, fmt.Errorf("envelope: %s gives provider %q the default work queue %s; a provider's own queue is not the default one (leave the provider out to use the default)",
				EnvProviderQueues, name, url)
		case KindOf(url) != KindOf(defaultURL):
			return r, fmt.Errorf("envelope: %s: provider %q's queue %s is not of the default work queue's kind (FIFO or standard); make them the same",
				EnvProviderQueues, name, url)
		}
		r.ByProvider[name] = url
	}
	return r, nil
}

// String is r's EnvProviderQueues value: the pairs, sorted by provider.
func (r Routes) String() string {
	var pairs []string
	for _, p := range slices.Sorted(maps.Keys(r.ByProvider)) {
		pairs = append(pairs, p+"="+r.ByProvider[p])
	}
	return strings.Join(pairs, ",")
}

// For returns the work queue of provider p's messages.
func (r Routes) For(p string) string {
	if url, ok := r.ByProvider[p]; ok {
		return url
	}
	return r.Default
}

// URLs are every work queue, the default first, then the providers' in
// the order of their names.
func (r Routes) URLs() []string {
	urls := []string{r.Default}
	for _, p := range slices.Sorted(maps.Keys(r.ByProvider)) {
		urls = append(urls, r.ByProvider[p])
	}
	return urls
}

// FromARN returns the work queue whose name ends the queue ARN arn (a
// record's eventSourceARN), and whether one does.
func (r Routes) FromARN(arn string) (string, bool) {
	i := strings.LastIndexByte(arn, ':')
	if arn == "" || i < 0 {
		return "", false
	}
	name := arn[i+1:]
	for _, url := range r.URLs() {
		if QueueName(url) == name {
			return url, true
		}
	}
	return "", false
}

// Misrouted reports whether a record of provider p's delivery that came
// from the queue with ARN sourceARN belongs on another work queue, and
// which: it came from a work queue of r that is not p's. A record whose
// source is unknown (no ARN, or a queue that is none of r's, such as a
// test's) is where it belongs.
func (r Routes) Misrouted(p, sourceARN string) (string, bool) {
	from, ok := r.FromARN(sourceARN)
	if !ok || from == r.For(p) {
		return "", false
	}
	return r.For(p), true
}

// QueueName is the queue's name: the last part of its URL.
func QueueName(url string) string {
	if i := strings.LastIndexByte(url, '/'); i >= 0 {
		return url[i+1:]
	}
	return url
}
