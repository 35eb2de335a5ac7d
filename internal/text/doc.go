// Package text bounds the free text Nudge stores and prints: a provider's
// error, a receipt, a reason, a value quoted back in an error message.
package text
