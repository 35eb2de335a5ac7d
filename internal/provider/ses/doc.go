// Package ses is the SES provider: e-mail through Amazon SES (API v2) with
// stored templates (templates/email), rendered with the reminder's metadata
// and sent to the address the delivery gives, tagged and headed with the
// delivery key (Sender). It also owns the templates: reading the
// repository's folders, the variables each renders, the catalogue the
// stack gives the intake, and the intake's check that a template is
// deployed (DeployedTemplates, TemplateLookup).
package ses
