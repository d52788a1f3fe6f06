package binlog

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapHandler forwards go-mysql's slog records to zap. go-mysql's Info
// messages are demoted to Debug: Info is for our lifecycle only.
type zapHandler struct{ log *zap.Logger }

func (h zapHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.Core().Enabled(level(l))
}

func (h zapHandler) Handle(_ context.Context, r slog.Record) error {
	fields := make([]zap.Field, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		fields = append(fields, zap.Any(a.Key, a.Value.Any()))
		return true
	})
	if ce := h.log.Check(level(r.Level), r.Message); ce != nil {
		ce.Write(fields...)
	}
	return nil
}

func (h zapHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	fields := make([]zap.Field, 0, len(attrs))
	for _, a := range attrs {
		fields = append(fields, zap.Any(a.Key, a.Value.Any()))
	}
	return zapHandler{h.log.With(fields...)}
}

func (h zapHandler) WithGroup(name string) slog.Handler { return zapHandler{h.log.Named(name)} }

func level(l slog.Level) zapcore.Level {
	switch {
	case l >= slog.LevelError:
		return zapcore.ErrorLevel
	case l >= slog.LevelWarn:
		return zapcore.WarnLevel
	default:
		return zapcore.DebugLevel
	}
}
