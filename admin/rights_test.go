package admin_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/admin"
	"github.com/switchyard/switchyard/bot"
)

// rightsOf answers as the agent runtime would, recording what it was asked.
type rightsOf struct{ asked []string }

func (r *rightsOf) Rights(_ context.Context, agent string, req bot.Requester, th bot.Thread) (bot.EffectiveRights, error) {
	r.asked = append(r.asked, agent+" for "+req.Handle()+" in "+th.Key())
	if req.Permission == "read" {
		return bot.EffectiveRights{Profile: "read-only", Reason: "requested by " + req.Handle() + ", read access"}, nil
	}
	return bot.EffectiveRights{Profile: "contributor", Reason: agent + "'s own profile"}, nil
}

func TestExplainSaysWhatTheAgentMayDoAndWhy(t *testing.T) {
	s := seed(t)
	rights := &rightsOf{}
	h := handler(admin.Options{Store: s.store, Intake: s.intake, Rights: rights})

	rec := serve(t, h, http.MethodPost, "/api/v1/explain",
		`{"source":"local","kind":"local.message","text":"big outage here","thread":"local:t9","requester":{"source":"github","id":"stranger","permission":"read"}}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"work_item":true,"agent":"ops","kind":"rule","reason":"rule \"outages\" (priority 10)","rule":"outages",
		"rights":{"profile":"read-only","reason":"requested by @stranger, read access"}}`, rec.Body.String())
	require.Equal(t, []string{"ops for @stranger in local:t9"}, rights.asked)

	// No work item, no rights.
	rec = serve(t, h, http.MethodPost, "/api/v1/explain",
		`{"source":"github","kind":"github.pull_request.opened","actor":"dan","repo":"acme/api","number":9,"thread":"github:acme/api#9"}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.NotContains(t, rec.Body.String(), "rights")
	require.Len(t, rights.asked, 1)
}
