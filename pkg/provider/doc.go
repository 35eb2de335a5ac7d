// Package provider sends a delivery to whoever delivers it (an email or SMS
// service, a support tool) and says how the attempt went.
//
// A Provider gets the delivery key as its idempotency key: a retry after an
// ambiguous failure sends the same key, so a provider that honours it sends
// once. Webhook is the built-in provider: an HTTPS POST of the delivery's
// identifiers and references, signed with HMAC-SHA256.
package provider
