// k8s-types: the local-disks reporter's condition and extended resource,
// written as a vendor's existing Go code writes them, with Kubernetes' own
// types: the node decoded into a k8s.io/api/core/v1.Node, the quantities
// k8s.io/apimachinery's resource.Quantity, the condition a
// corev1.NodeCondition; then put into the part. It is the measure of what
// those types cost a Go setter (size, compile, activation, a call) beside
// local-disks, which uses only the SDK's types (docs/benchmarks.md).
package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"nodestatus.dev/sdk"
)

// The names this setter writes.
const (
	Resource      = corev1.ResourceName("example.com/k8s-types")
	ConditionType = corev1.NodeConditionType("K8sTypesDecoded")
	Label         = "example.com/k8s-types-os"
)

// Report reads the node with Kubernetes' types and says what it read.
func Report(part *nodestatus.Part, node *corev1.Node) error {
	cpu := node.Status.Capacity[corev1.ResourceCPU]
	// One extended resource for each full CPU, as a vendor's per-core
	// device would be counted.
	per := resource.NewQuantity(cpu.Value(), resource.DecimalSI)
	q, err := nodestatus.ParseQuantity(per.String())
	if err != nil {
		return err
	}
	part.SetCapacity(string(Resource), q).SetAllocatable(string(Resource), q)
	if os, ok := node.Labels[corev1.LabelOSStable]; ok {
		part.SetLabel(Label, os)
	}
	c := corev1.NodeCondition{
		Type:    ConditionType,
		Status:  corev1.ConditionTrue,
		Reason:  "Decoded",
		Message: fmt.Sprintf("%d condition(s), %d address(es), cpu %s", len(node.Status.Conditions), len(node.Status.Addresses), cpu.String()),
	}
	part.SetCondition(string(c.Type), nodestatus.ConditionStatus(c.Status), c.Reason, c.Message)
	return nil
}

type setter struct{}

func (setter) Metadata() nodestatus.Metadata {
	return nodestatus.Metadata{
		Name:        "k8s-types",
		Version:     "0.1.0",
		Description: "reads the node as a k8s.io/api/core/v1.Node and reports from it (the cost of Kubernetes' types in a Go setter)",
	}
}

func (setter) Set(n *nodestatus.Node) (*nodestatus.Part, error) {
	var node corev1.Node
	if err := n.Decode(&node); err != nil {
		return nil, fmt.Errorf("the node is not a v1.Node: %w", err)
	}
	part := n.Part()
	if err := Report(part, &node); err != nil {
		return nil, err
	}
	return part, nil
}

func init() { nodestatus.Export(setter{}) }

func main() {}
