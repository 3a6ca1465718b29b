package monitoring

import (
	"fmt"
	"slices"
	"strings"
)

// promqlKeywords are identifiers that are not metric names when not
// followed by "(".
var promqlKeywords = []string{
	"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
	"group_left", "group_right", "inf", "nan",
}

// aggregations may put their by/without clause before the parenthesis:
// sum by (pod) (x).
var aggregations = []string{
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio",
}

// groupingKeywords are followed by a parenthesised list of label names.
var groupingKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// MetricNames returns the metric names a PromQL expression selects, in
// order of first use. It is a lexer, not a parser: it skips strings, label
// matchers ({...}), ranges and subqueries ([...]), Grafana variables ($x,
// ${x}), numbers and durations, the label lists of by/without/on/ignoring/
// group_left/group_right, and identifiers followed by "(" (functions and
// aggregations). Every other identifier is a metric name. Syntax is left to
// Prometheus' parser (promtool); an unbalanced bracket or string is an
// error here.
func MetricNames(expr string) ([]string, error) {
	var names []string
	i := 0
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipBracket(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				end := strings.IndexByte(expr[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unterminated ${ at %d in %q", i-1, expr)
				}
				i += end + 1
				continue
			}
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			// numbers, 1e3, 0x1f, durations (5m, 1h30m)
			for i < len(expr) && (isIdent(expr[i], false) || expr[i] == '.') {
				i++
			}
		case isIdent(c, true):
			start := i
			for i < len(expr) && isIdent(expr[i], false) {
				i++
			}
			id := expr[start:i]
			next := i
			for next < len(expr) && (expr[next] == ' ' || expr[next] == '\t' || expr[next] == '\n') {
				next++
			}
			lower := strings.ToLower(id)
			if next < len(expr) && expr[next] == '(' {
				if slices.Contains(groupingKeywords, lower) {
					end, err := skipBracket(expr, next)
					if err != nil {
						return nil, err
					}
					i = end
				}
				continue // a function or an aggregation: its arguments follow
			}
			if slices.Contains(promqlKeywords, lower) {
				continue
			}
			if slices.Contains(aggregations, lower) && (startsWord(expr[next:], "by") || startsWord(expr[next:], "without")) {
				continue // the clause's label list is skipped as the next word
			}
			if !slices.Contains(names, id) {
				names = append(names, id)
			}
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unbalanced %q at %d in %q", c, i, expr)
		default:
			i++
		}
	}
	return names, nil
}

// startsWord reports whether s starts with the identifier w (not a longer
// one), case-insensitively.
func startsWord(s, w string) bool {
	return len(s) >= len(w) && strings.EqualFold(s[:len(w)], w) && (len(s) == len(w) || !isIdent(s[len(w)], false))
}

func isIdent(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// skipString returns the index after the string literal starting at i.
func skipString(expr string, i int) (int, error) {
	q := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && q != '`':
			j++
		case expr[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at %d in %q", i, expr)
}

// skipBracket returns the index after the bracket ({, [ or () opened at i
// is closed, strings and nested brackets included.
func skipBracket(expr string, i int) (int, error) {
	closing := map[byte]byte{'{': '}', '[': ']', '(': ')'}
	stack := []byte{closing[expr[i]]}
	for j := i + 1; j < len(expr); j++ {
		c := expr[j]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case c == '{' || c == '[' || c == '(':
			stack = append(stack, closing[c])
		case c == '}' || c == ']' || c == ')':
			if c != stack[len(stack)-1] {
				return 0, fmt.Errorf("unbalanced %q at %d in %q", c, j, expr)
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed %q at %d in %q", expr[i], i, expr)
}
