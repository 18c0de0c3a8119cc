// Karpenter's DRA kwok driver (sigs.k8s.io/karpenter/dra-kwok-driver), which publishes ResourceSlices on kwok
// nodes as DRAConfig objects declare them, with its addresses taken from the environment: upstream's main binds
// :8082 and :8083 on every interface, which would collide between clusters on one machine and leave loopback.
// Everything else is upstream's main.go of the same module version, but for one line: upstream's scheme lacks the
// meta types of test.karpenter.sh/v1alpha1 (metav1.AddToGroupVersion), so its cached client's list of DRAConfigs
// fails ("v1.ListOptions is not suitable for converting to test.karpenter.sh/v1alpha1") and no slice is published.
package main

import (
	"context"
	"os"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"sigs.k8s.io/karpenter/dra-kwok-driver/pkg/apis/v1alpha1"
	"sigs.k8s.io/karpenter/dra-kwok-driver/pkg/controllers"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(resourcev1.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	metav1.AddToGroupVersion(scheme, v1alpha1.GroupVersion)
}

// address is the environment variable's value, or fallback ("0" turns the metrics server off).
func address(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

func main() {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	ctx := context.Background()
	logger := ctrl.Log.WithName("dra-kwok-driver")
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: address("METRICS_ADDRESS", "0")},
		HealthProbeBindAddress: address("HEALTH_PROBE_ADDRESS", "127.0.0.1:8083"),
	})
	if err != nil {
		logger.Error(err, "unable to start manager")
		panic(err)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	if err := controllers.NewResourceSliceController(mgr.GetClient()).Register(ctx, mgr); err != nil {
		logger.Error(err, "unable to register resourceslice controller")
		panic(err)
	}
	logger.Info("Starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		logger.Error(err, "problem running manager")
		panic(err)
	}
}
