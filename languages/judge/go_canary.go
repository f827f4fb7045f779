package @PACKAGE@

// codeagent's judge: a test that must be reported failing, with its secret, in every graded run of
// this package's tests (a run whose output lacks it, or shows it passing, was not the run it claims).
// It is added to a filtered run too: -test.run gets it as one more alternative at the top level.

import (
	"os"
	"strings"
	"testing"
)

// codeagentCanaryArmed@NAME@: started by the judge's launcher (a test that runs its own binary again, the
// helper-process pattern, starts it without: there the canary neither joins -run nor fails)
var codeagentCanaryArmed@NAME@ = os.Getenv("CODEAGENT_CANARY_@NONCE@") != ""

func init() {
	if !codeagentCanaryArmed@NAME@ {
		return
	}
	os.Unsetenv("CODEAGENT_CANARY_@NONCE@")
	for i, arg := range os.Args {
		for _, flag := range []string{"-test.run=", "--test.run="} {
			if strings.HasPrefix(arg, flag) && len(arg) > len(flag) {
				os.Args[i] = flag + codeagentCanaryPattern@NAME@(arg[len(flag):])
			}
		}
	}
}

// codeagentCanaryPattern@NAME@ adds the canary to the first level of a -run pattern (levels are split
// at slashes outside brackets and parentheses, as the testing package splits them).
func codeagentCanaryPattern@NAME@(pattern string) string {
	depth, escaped := 0, false
	for i, char := range pattern {
		switch {
		case escaped:
			escaped = false
		case char == '\\':
			escaped = true
		case char == '[' || char == '(':
			depth++
		case (char == ']' || char == ')') && depth > 0:
			depth--
		case char == '/' && depth == 0:
			return "(?:" + pattern[:i] + ")|^Test@NAME@$" + pattern[i:]
		}
	}
	return "(?:" + pattern + ")|^Test@NAME@$"
}

func Test@NAME@(t *testing.T) {
	if codeagentCanaryArmed@NAME@ {
		t.Fatal("@SECRET@")
	}
}
