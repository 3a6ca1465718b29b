// Package argocd holds the Argo CD health check of Strata's custom
// resources (health.lua) and the argocd-cm snippet that installs it
// (argocd-cm.yaml). Health runs the script the way Argo CD does, with
// gopher-lua and the object as the global obj, so tests can assert what
// Argo CD shows for the objects the operator writes.
package argocd

import (
	_ "embed"
	"fmt"

	lua "github.com/yuin/gopher-lua"
)

// HealthLua is the health check script, for every kind in Kinds.
//
//go:embed health.lua
var HealthLua string

// ConfigMapSnippet is the argocd-cm snippet installing HealthLua.
//
//go:embed argocd-cm.yaml
var ConfigMapSnippet string

// Kinds are the kafka.strata.dev kinds the snippet installs the check for.
var Kinds = []string{"KafkaCluster", "FastBucket", "KafkaTopic", "KafkaUser", "KafkaRebalance"}

// ConfigMapKey is the argocd-cm key of a kind's health check.
func ConfigMapKey(kind string) string {
	return "resource.customizations.health.kafka.strata.dev_" + kind
}

// Health statuses Argo CD knows.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
)

// HealthStatus is what the script returns.
type HealthStatus struct {
	Status  string
	Message string
}

// Health runs HealthLua against obj, an object in its unstructured form
// (as runtime.DefaultUnstructuredConverter or a JSON decode gives it).
func Health(obj map[string]any) (HealthStatus, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer L.Close()
	// Argo CD's sandbox: base, table, string and math, no io or os.
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	v, err := toLua(L, obj)
	if err != nil {
		return HealthStatus{}, err
	}
	L.SetGlobal("obj", v)
	if err := L.DoString(HealthLua); err != nil {
		return HealthStatus{}, fmt.Errorf("health.lua: %w", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return HealthStatus{}, fmt.Errorf("health.lua returned %s, not a table", L.Get(-1).Type())
	}
	return HealthStatus{
		Status:  lua.LVAsString(ret.RawGetString("status")),
		Message: lua.LVAsString(ret.RawGetString("message")),
	}, nil
}

// toLua converts a decoded JSON value to Lua as Argo CD does: objects
// and arrays become tables (arrays 1-based), numbers become numbers.
func toLua(L *lua.LState, v any) (lua.LValue, error) {
	switch v := v.(type) {
	case nil:
		return lua.LNil, nil
	case string:
		return lua.LString(v), nil
	case bool:
		return lua.LBool(v), nil
	case int64:
		return lua.LNumber(v), nil
	case int:
		return lua.LNumber(v), nil
	case float64:
		return lua.LNumber(v), nil
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			lv, err := toLua(L, e)
			if err != nil {
				return nil, err
			}
			t.RawSetString(k, lv)
		}
		return t, nil
	case []any:
		t := L.NewTable()
		for _, e := range v {
			lv, err := toLua(L, e)
			if err != nil {
				return nil, err
			}
			t.Append(lv)
		}
		return t, nil
	default:
		return nil, fmt.Errorf("cannot convert %T to Lua", v)
	}
}
