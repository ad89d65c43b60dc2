package figure

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"

	"github.com/softmrc/softmrc/testbed/lab/series"
)

func TestSave(t *testing.T) {
	s := series.Series{Name: "rx:h3", Unit: "bit/s"}
	for i := 1; i <= 100; i++ {
		v := 100e6
		if i > 50 {
			v = 75e6
		}
		s.Points = append(s.Points, series.Point{T: time.Duration(i) * 10 * time.Millisecond, V: v})
	}
	path := filepath.Join(t.TempDir(), "f.png")
	if err := Save(Figure{Title: "rx", Series: []series.Series{s, s}, Marks: []Mark{{T: 500 * time.Millisecond, Label: "h0:p1 down"}}}, path, 6*vg.Inch, 3*vg.Inch); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cfg, err := png.DecodeConfig(fh)
	if err != nil || cfg.Width < 400 {
		t.Errorf("png %+v %v", cfg, err)
	}
}
