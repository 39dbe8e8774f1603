package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// TestScriptedModelScripts: --script picks the script the scripted model
// (not a language model) serves and says so; an unknown name is a usage
// error naming the scripts.
func TestScriptedModelScripts(t *testing.T) {
	_, _, err := runCmd(t, "scripted-model", "--script", "gpt-4", "--addr", "127.0.0.1:0")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(ue.msg, "demo, self-change") {
		t.Fatalf("an unknown script: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- cmdScriptedModel(ctx, addr, "self-change", &stdout, &stderr) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if !strings.Contains(stderr.String(), "not a language model; script self-change") {
			t.Errorf("stderr %q", stderr.String())
		}
	}()
	body := `{"model":"scripted","messages":[{"role":"user","content":"what tools"}],"tools":[{"type":"function","function":{"name":"alpha","parameters":{"type":"object"}}}]}`
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Post(fmt.Sprintf("http://%s/v1/chat/completions", addr), "application/json", strings.NewReader(body))
		if err == nil {
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(raw), "I am offered: alpha.") {
				t.Fatalf("%d %s", resp.StatusCode, raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scripted model did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(fmt.Sprintf("http://%s%s", addr, scripted.DebugRequestsPath))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(raw), `"user":"what tools"`) {
		t.Fatalf("%s: %d %s", scripted.DebugRequestsPath, resp.StatusCode, raw)
	}
}
