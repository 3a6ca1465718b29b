package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"sigs.k8s.io/yaml"
)

// Query is one PromQL expression shipped in a dashboard or a rule.
type Query struct {
	// Where names it: "<file>: <panel or alert>".
	Where string
	Expr  string
}

// PrometheusRule is the part of a prometheus-operator PrometheusRule that
// promtool reads (spec is a Prometheus rule file).
type PrometheusRule struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       RuleFile       `json:"spec"`
}

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is a group of rules.
type RuleGroup struct {
	Name  string           `json:"name"`
	Rules []map[string]any `json:"rules"`
}

// LoadRules reads a PrometheusRule manifest.
func LoadRules(path string) (*PrometheusRule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr PrometheusRule
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("%s: kind %q, want PrometheusRule", path, pr.Kind)
	}
	return &pr, nil
}

// Alerts returns the alert names of a rule file, in order.
func (f RuleFile) Alerts() []string {
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if a, ok := r["alert"].(string); ok {
				out = append(out, a)
			}
		}
	}
	return out
}

// Queries returns the expressions of a rule file.
func (f RuleFile) Queries(file string) []Query {
	var out []Query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name, _ := r["alert"].(string)
			if name == "" {
				name, _ = r["record"].(string)
			}
			expr, _ := r["expr"].(string)
			out = append(out, Query{Where: file + ": " + name, Expr: expr})
		}
	}
	return out
}

// labelValues matches Grafana's label_values(<selector>, <label>) variable
// query; only the selector is PromQL.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// DashboardQueries returns every PromQL expression of the Grafana
// dashboards (*.json) in dir: panel targets (rows' nested panels too) and
// query variables.
func DashboardQueries(dir string) ([]Query, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboards in %s", dir)
	}
	sort.Strings(files)
	var out []Query
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d struct {
			Title      string  `json:"title"`
			Panels     []panel `json:"panels"`
			Templating struct {
				List []struct {
					Name  string          `json:"name"`
					Type  string          `json:"type"`
					Query json.RawMessage `json:"query"`
				} `json:"list"`
			} `json:"templating"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		base := filepath.Base(f)
		var walk func(ps []panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				for _, t := range p.Targets {
					out = append(out, Query{Where: fmt.Sprintf("%s: panel %q target %s", base, p.Title, t.RefID), Expr: t.Expr})
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				// older dashboards store the query as a plain string
				if err := json.Unmarshal(v.Query, &q.Query); err != nil {
					return nil, fmt.Errorf("%s: variable %s: %w", f, v.Name, err)
				}
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil {
				return nil, fmt.Errorf("%s: variable %s: query %q is not label_values(<selector>, <label>)", f, v.Name, q.Query)
			}
			out = append(out, Query{Where: fmt.Sprintf("%s: variable %s", base, v.Name), Expr: m[1]})
		}
	}
	return out, nil
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// grafanaVariables fill in the variables the dashboards use, so that
// Prometheus' parser can read a query.
var grafanaVariables = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)

// FillVariables replaces Grafana variables with values Prometheus parses:
// intervals by 5m, anything else by "x".
func FillVariables(expr string) string {
	return grafanaVariables.ReplaceAllStringFunc(expr, func(v string) string {
		switch v {
		case "$__rate_interval", "$__interval", "$__range", "${__rate_interval}", "${__interval}", "${__range}":
			return "5m"
		}
		return "x"
	})
}
