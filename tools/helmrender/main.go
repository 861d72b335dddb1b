// helmrender renders a Helm chart offline with Go's text/template and the handful of Helm
// functions deploy/helm/strata uses (include, toYaml, nindent, indent, quote, default,
// sha256sum), for tests where Helm itself is not installed. It is not Helm: no sprig library,
// no lookup, no hooks; a chart that needs more fails here with "function not defined".
//
// Input on stdin, JSON (the test reads the chart's YAML with Python and sends it as JSON):
//
//	{"Values": {...}, "Chart": {...Chart.yaml...}, "Release": {"Name": .., "Namespace": ..}}
//
// Usage: helmrender CHART_DIR < input.json > manifests.yaml
// Output: each template under CHART_DIR/templates (not _*.tpl), in name order, as Helm
// prints them ("---" and a "# Source:" comment), the empty ones left out.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

func die(f string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "helmrender: "+f+"\n", a...)
	os.Exit(1)
}

// yamlScalar writes a scalar as YAML would read it back: strings quoted when needed.
func yamlScalar(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		b, _ := json.Marshal(x)
		return string(b)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// toYaml writes maps and lists in block style, keys sorted, as Helm's toYaml does.
func toYaml(v interface{}) string {
	var b strings.Builder
	writeYaml(&b, v, 0)
	return strings.TrimSuffix(b.String(), "\n")
}

func writeYaml(b *strings.Builder, v interface{}, ind int) {
	pad := strings.Repeat(" ", ind)
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) == 0 {
			b.WriteString(pad + "{}\n")
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			writeEntry(b, pad+yamlKey(k)+":", x[k], ind)
		}
	case []interface{}:
		if len(x) == 0 {
			b.WriteString(pad + "[]\n")
			return
		}
		for _, e := range x {
			if m, ok := e.(map[string]interface{}); ok && len(m) > 0 {
				var inner strings.Builder
				writeYaml(&inner, m, ind+2)
				s := inner.String()
				b.WriteString(pad + "- " + s[ind+2:])
			} else {
				writeEntry(b, pad+"-", e, ind)
			}
		}
	default:
		b.WriteString(pad + yamlScalar(v) + "\n")
	}
}

func writeEntry(b *strings.Builder, head string, v interface{}, ind int) {
	switch x := v.(type) {
	case map[string]interface{}:
		if len(x) > 0 {
			b.WriteString(head + "\n")
			writeYaml(b, x, ind+2)
			return
		}
		b.WriteString(head + " {}\n")
	case []interface{}:
		if len(x) > 0 {
			b.WriteString(head + "\n")
			writeYaml(b, x, ind+2)
			return
		}
		b.WriteString(head + " []\n")
	default:
		b.WriteString(head + " " + yamlScalar(v) + "\n")
	}
}

func yamlKey(k string) string {
	for _, c := range k {
		if !(c == '.' || c == '-' || c == '_' || c == '/' || (c >= 'a' && c <= 'z') ||
			(c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return yamlScalar(k)
		}
	}
	return k
}

// numbers turns JSON numbers into float64, as Helm 3 reads values (YAML through JSON): a
// template printing a large number gets Helm's e-notation (604800000 prints 6.048e+08), so
// the chart's tests see what Helm would render.
func numbers(v interface{}) interface{} {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]interface{}:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []interface{}:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func empty(v interface{}) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case float64:
		return x == 0
	case int64:
		return x == 0
	case map[string]interface{}:
		return len(x) == 0
	case []interface{}:
		return len(x) == 0
	}
	return false
}

func main() {
	if len(os.Args) != 2 {
		die("usage: helmrender CHART_DIR < input.json")
	}
	chart := os.Args[1]
	var raw interface{}
	dec := json.NewDecoder(os.Stdin)
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		die("input: %v", err)
	}
	data, ok := numbers(raw).(map[string]interface{})
	if !ok {
		die("input: not a JSON object")
	}
	rel, _ := data["Release"].(map[string]interface{})
	if rel == nil {
		rel = map[string]interface{}{}
		data["Release"] = rel
	}
	if _, ok := rel["Service"]; !ok {
		rel["Service"] = "Helm"
	}
	root := template.New("chart").Option("missingkey=zero")
	funcs := template.FuncMap{
		"toYaml":  toYaml,
		"indent":  indent,
		"nindent": func(n int, s string) string { return "\n" + indent(n, s) },
		"quote":   func(v interface{}) string { return strconv.Quote(fmt.Sprint(v)) },
		"default": func(d, v interface{}) interface{} {
			if empty(v) {
				return d
			}
			return v
		},
		"sha256sum": func(s string) string {
			h := sha256.Sum256([]byte(s))
			return hex.EncodeToString(h[:])
		},
		"include": func(name string, v interface{}) (string, error) {
			var b bytes.Buffer
			err := root.ExecuteTemplate(&b, name, v)
			return b.String(), err
		},
	}
	root.Funcs(funcs)
	files, _ := filepath.Glob(filepath.Join(chart, "templates", "*"))
	sort.Strings(files)
	var outputs []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			die("%v", err)
		}
		base := filepath.Base(f)
		if _, err := root.New(base).Parse(string(src)); err != nil {
			die("%s: %v", base, err)
		}
		if !strings.HasPrefix(base, "_") {
			outputs = append(outputs, base)
		}
	}
	for _, name := range outputs {
		var b bytes.Buffer
		if err := root.ExecuteTemplate(&b, name, data); err != nil {
			die("%s: %v", name, err)
		}
		s := strings.ReplaceAll(b.String(), "<no value>", "")
		if strings.TrimSpace(s) == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s/templates/%s\n%s\n", filepath.Base(chart), name,
			strings.TrimRight(s, "\n"))
	}
}
