// Package scan is a temporary stand-in; replaced by the real matcher.
package scan

import (
	"regexp"
	"strings"
)

type Rule struct {
	Code    string `json:"code"`
	Name    string `json:"name"`
	Message string `json:"message"`
	Pattern string `json:"pattern"`
}
type Text struct{ Where, Text string }
type Match struct {
	Code, Name, Message, Where, Excerpt string
	Offset                              int
}
type RuleSet struct {
	rules []Rule
	res   []*regexp.Regexp
}

func Compile(rules []Rule) (*RuleSet, error) {
	rs := &RuleSet{rules: rules}
	for _, r := range rules {
		re, err := regexp.Compile("(?i)" + r.Pattern)
		if err != nil {
			return nil, err
		}
		rs.res = append(rs.res, re)
	}
	return rs, nil
}
func (rs *RuleSet) Match(texts []Text) []Match {
	var out []Match
	for _, t := range texts {
		for i, re := range rs.res {
			if loc := re.FindStringIndex(t.Text); loc != nil {
				r := rs.rules[i]
				out = append(out, Match{r.Code, r.Name, r.Message, t.Where, t.Text[loc[0]:loc[1]], loc[0]})
			}
		}
	}
	return out
}

type Finding struct {
	Code, Message, Where string
	Encodings            []string
	Decoded              string
	Offset               int
}

func Decode(texts []Text) []Finding { return nil }

type Origin struct{ Where, Value, Kind, Block string }

func Provenance(args []Text, trusted []string, untrusted []Text) []Origin {
	var out []Origin
	for _, a := range args {
		if len(a.Text) < 8 {
			continue
		}
		inTrusted := false
		for _, t := range trusted {
			if strings.Contains(strings.ToLower(t), strings.ToLower(a.Text)) {
				inTrusted = true
			}
		}
		if inTrusted {
			continue
		}
		for _, u := range untrusted {
			if strings.Contains(strings.ToLower(u.Text), strings.ToLower(a.Text)) {
				out = append(out, Origin{a.Where, a.Text, "value", u.Where})
				break
			}
		}
	}
	return out
}
