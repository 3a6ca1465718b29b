package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	strata "github.com/strata-dev/strata/api/v1alpha1"
)

// step is one part of the reconcile of a resource the operator keeps in
// Kafka (KafkaTopic, KafkaUser); S is the scope the steps share.
type step[S any] struct {
	name string
	run  func(context.Context, S) error
}

// stepReport says how runSteps reports the step that stops a reconcile
// on one kind.
type stepReport struct {
	object client.Object
	// conditions are object's status conditions: an event is written
	// only when Ready's reason or message changes.
	conditions *[]metav1.Condition
	// event is the reason of the Warning event; what names the kind in
	// the log line ("topic", "user").
	event, what string
	// setReady sets Ready and the kstatus conditions (setTopicCondition,
	// setUserCondition).
	setReady func(status metav1.ConditionStatus, reason, msg string)
}

// runSteps runs steps in order until one fails. That one's *topicStop,
// or for any other error kafkaFailure's, sets Ready False with its
// reason and ends the reconcile: stopped is true, and res and err are
// what Reconcile returns: the error for controller-runtime's backoff when
// the stop says retry, else a requeue after *requeue (read after the
// steps, which may change it).
func runSteps[S any](ctx context.Context, rec recorder.EventRecorder, rep stepReport, requeue *time.Duration, s S, steps []step[S]) (res ctrl.Result, stopped bool, err error) {
	for _, st := range steps {
		err := st.run(ctx, s)
		if err == nil {
			continue
		}
		stop := &topicStop{}
		if !errors.As(err, &stop) {
			stop = kafkaFailure(st.name, err)
		}
		prev := meta.FindStatusCondition(*rep.conditions, strata.ConditionReady)
		if prev == nil || prev.Reason != stop.reason || prev.Message != stop.message {
			rec.Eventf(rep.object, nil, corev1.EventTypeWarning, rep.event, "Reconcile", "%s", stop.message)
		}
		rep.setReady(metav1.ConditionFalse, stop.reason, stop.message)
		if stop.retry {
			return ctrl.Result{}, true, fmt.Errorf("%s: %w", st.name, err)
		}
		log.FromContext(ctx).Info(rep.what+" cannot converge", "reason", stop.reason, "problem", stop.message)
		return ctrl.Result{RequeueAfter: *requeue}, true, nil
	}
	return ctrl.Result{}, false, nil
}
