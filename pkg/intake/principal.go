package intake

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/nudgehq/nudge/pkg/schedule"
)

// principal is the caller's role or user as logs, histories and the
// reminders it creates keep it. An assumed role's session name is left out
// (an SSO session is often a person's e-mail address). A user or role name
// that looks like an e-mail address is masked as the ledger masks a
// recipient's (schedule.MaskAddress), and told apart from others of the same
// mask by the user's or role's IAM unique id (the event's userId: AIDA… or
// AROA…, without an assumed role's session), which names nobody:
// "arn:aws:iam::123456789012:user/j•••@example.com#AIDA…". So the same user
// is the same creator for its life, and two users of one mask are two.
// Without a unique id (never from a function URL), a digest of the ARN
// tells them apart instead.
func principal(arn, userID string) string {
	p := withoutSession(arn)
	i := strings.LastIndexByte(p, '/')
	if i < 0 || !strings.Contains(p[i+1:], "@") {
		return p
	}
	id, _, _ := strings.Cut(userID, ":")
	if !uniqueID.MatchString(id) {
		sum := sha256.Sum256([]byte(p))
		id = "sha256:" + hex.EncodeToString(sum[:8])
	}
	return p[:i+1] + schedule.MaskAddress(p[i+1:]) + "#" + id
}

// uniqueID matches an IAM unique id (AIDA… for a user, AROA… for a role).
var uniqueID = regexp.MustCompile(`^A[0-9A-Z]{15,127}$`)

// FullAccessSetting is the setting that names the principals with full
// access (Settings.FullAccessPrincipals).
const FullAccessSetting = "NUDGE_FULL_ACCESS_PRINCIPALS"

// iamPrincipal matches an IAM role's or user's ARN, with its path:
// arn:PARTITION:iam::ACCOUNT:role/PATH/NAME or …:user/PATH/NAME.
var iamPrincipal = regexp.MustCompile(`^arn:(aws[a-z-]*):iam::([0-9]{12}):(role|user)/((?:[\x21-\x7e]+/)*)([\w+=,.@-]{1,64})$`)

// fullAccessKey is the caller a full-access principal's requests carry
// (callerARN): a role's ARN becomes its sessions' (arn:…:sts::ACCOUNT:
// assumed-role/NAME, which has no path); a user's is itself. A value that
// is not an IAM role's or user's ARN is refused with the fix.
func fullAccessKey(arn string) (string, error) {
	m := iamPrincipal.FindStringSubmatch(arn)
	if m == nil {
		fix := "give IAM role or user ARNs, comma-separated: arn:aws:iam::ACCOUNT:role/NAME or arn:aws:iam::ACCOUNT:user/NAME"
		if strings.Contains(arn, ":assumed-role/") {
			fix = "give the role's ARN (arn:aws:iam::ACCOUNT:role/NAME), not an assumed-role session's"
		}
		return "", fmt.Errorf("intake: %s names %q, which is not an IAM role's or user's ARN; %s", FullAccessSetting, arn, fix)
	}
	if m[3] == "role" {
		return "arn:" + m[1] + ":sts::" + m[2] + ":assumed-role/" + m[5], nil
	}
	return arn, nil
}

// parseFullAccess reads the full-access setting: ARNs, comma-separated,
// each an IAM role's or user's.
func parseFullAccess(raw string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(raw, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if _, err := fullAccessKey(a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// fullAccess is the set of full-access callers, by fullAccessKey.
type fullAccess map[string]bool

func newFullAccess(arns []string) (fullAccess, error) {
	fa := fullAccess{}
	for _, a := range arns {
		k, err := fullAccessKey(a)
		if err != nil {
			return nil, err
		}
		fa[k] = true
	}
	return fa, nil
}

// caller is who sent r, as the store's caller door takes it: its
// principal, and whether the stage gives it full access.
func (h *Handler) caller(r *http.Request) schedule.Caller {
	return schedule.Caller{Principal: Caller(r.Context()), FullAccess: h.full[callerARN(r.Context())]}
}
