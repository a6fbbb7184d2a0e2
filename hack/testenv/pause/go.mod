module karmada-operator.local/testenv/pause

go 1.24
