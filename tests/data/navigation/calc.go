package calc

import "fmt"

type Calc struct { total int }

type (
	Op int
	Named interface { Name() string }
)

func New() *Calc { return &Calc{} }

func (c *Calc) Add(n int) int {
	c.total += n
	fmt.Println(c.total)
	return c.total
}
