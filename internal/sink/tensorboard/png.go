package tensorboard

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"strings"
)

// pngPicture checks that b is a PNG and describes it for an image summary. The colorspace is
// what summary.proto names: 1 gray, 3 RGB, 4 RGBA (a palette with any translucent entry counts
// as RGBA).
func pngPicture(tag string, b []byte) (picture, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(b))
	if err != nil {
		return picture{}, fmt.Errorf("not a PNG: %w", err)
	}
	return picture{tag: tag, png: b, width: cfg.Width, height: cfg.Height, colorspace: colorspace(cfg)}, nil
}

func colorspace(cfg image.Config) int {
	switch m := cfg.ColorModel.(type) {
	case color.Palette:
		for _, c := range m {
			if _, _, _, a := c.RGBA(); a != 0xffff {
				return 4
			}
		}
		return 3
	}
	switch cfg.ColorModel {
	case color.GrayModel, color.Gray16Model:
		return 1
	case color.RGBAModel, color.RGBA64Model:
		return 3 // the PNG decoder reports truecolor without alpha as opaque RGBA
	}
	return 4
}

// plotTag names a plot after its file: "plots/kv_cache_usage_perc" for
// ".../kv_cache_usage_perc.png". TensorBoard groups tags by their first segment.
func plotTag(path string) string {
	base := filepath.Base(path)
	return "plots/" + strings.TrimSuffix(base, filepath.Ext(base))
}
