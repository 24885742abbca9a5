package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/switchyard/switchyard/bot"
	"github.com/switchyard/switchyard/httpapi"
)

// ollamaProbeTimeout bounds the look for a local Ollama: the daemon starts
// up waiting for it.
const ollamaProbeTimeout = 2 * time.Second

// Detect chooses a default model when the config names none, so a machine
// with any model access works without configuration. In order:
// ANTHROPIC_API_KEY (model ANTHROPIC_MODEL or the SDK's current Sonnet),
// OPENAI_API_KEY with OPENAI_BASE_URL when set (model OPENAI_MODEL or the
// SDK's current GPT), then an Ollama server answering at OLLAMA_HOST or
// 127.0.0.1:11434 with its first installed model. It returns the config, a
// description for the start-up log, and whether anything was found.
func Detect(ctx context.Context, env func(string) string, hc *http.Client) (Config, string, bool) {
	if hc == nil {
		hc = &http.Client{}
	}
	if key := env("ANTHROPIC_API_KEY"); key != "" {
		c := Config{Provider: ProviderAnthropic, APIKey: bot.Secret(key), Model: orDefault(env("ANTHROPIC_MODEL"), anthropic.ModelClaudeSonnet5_5)}
		return c, "ANTHROPIC_API_KEY is set: the default model is " + c.Describe(), true
	}
	if key := env("OPENAI_API_KEY"); key != "" {
		c := Config{Provider: ProviderOpenAI, APIKey: bot.Secret(key), BaseURL: env("OPENAI_BASE_URL"), Model: orDefault(env("OPENAI_MODEL"), openai.ChatModelGPT5_5)}
		return c, "OPENAI_API_KEY is set: the default model is " + c.Describe(), true
	}
	host := ollamaHost(env("OLLAMA_HOST"))
	model, err := firstOllamaModel(ctx, hc, host)
	switch {
	case errors.Is(err, errNoOllamaModels):
		return Config{}, fmt.Sprintf("no model configured: ANTHROPIC_API_KEY and OPENAI_API_KEY are unset and the Ollama at %s has no models (ollama pull llama3.2)", host), false
	case err != nil:
		return Config{}, fmt.Sprintf("no model configured: ANTHROPIC_API_KEY and OPENAI_API_KEY are unset and no Ollama answered at %s (%v)", host, err), false
	}
	c := Config{Provider: ProviderOpenAI, BaseURL: host + "/v1", Model: model}
	return c, "Ollama answered at " + host + ": the default model is its " + model, true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ollamaHost turns OLLAMA_HOST ("0.0.0.0", "host:port", "http://host:port")
// into a base URL the way the ollama CLI reads it.
func ollamaHost(v string) string {
	v = strings.TrimRight(strings.TrimSpace(v), "/")
	if v == "" {
		return "http://127.0.0.1:11434"
	}
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	scheme, rest, _ := strings.Cut(v, "://")
	host := rest
	if h, _, ok := strings.Cut(rest, "/"); ok {
		host = h
	}
	if !strings.Contains(host, ":") {
		host += ":11434"
	}
	if strings.HasPrefix(host, "0.0.0.0:") {
		host = "127.0.0.1:" + strings.TrimPrefix(host, "0.0.0.0:")
	}
	return scheme + "://" + host
}

func firstOllamaModel(ctx context.Context, hc *http.Client, host string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ollamaProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+"/api/tags", nil)
	if err != nil {
		return "", err
	}
	res, err := hc.Do(req)
	if err != nil {
		return "", errors.New(httpapi.Unreachable(err))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /api/tags: HTTP %d", res.StatusCode)
	}
	var tags struct {
		Models []struct {
			Name  string `json:"name"`
			Model string `json:"model"`
		} `json:"models"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&tags); err != nil {
		return "", fmt.Errorf("GET /api/tags: %w", err)
	}
	for _, m := range tags.Models {
		if m.Name != "" {
			return m.Name, nil
		}
		if m.Model != "" {
			return m.Model, nil
		}
	}
	return "", errNoOllamaModels
}

// errNoOllamaModels is an Ollama that answers with no model installed.
var errNoOllamaModels = errors.New("no models installed")
