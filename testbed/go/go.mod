module rametr.example/testbed/go

go 1.19
