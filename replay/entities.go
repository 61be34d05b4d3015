package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlqdash/dlqdash/dlq"
)

// entity returns (and caches) what the broker of the job's messages says
// about path.
func (r *run) entity(ctx context.Context, path string) (EntityInfo, error) {
	return r.entityIn(ctx, r.job.Namespace, path)
}

// entityIn returns (and caches) what namespace's broker says about path.
func (r *run) entityIn(ctx context.Context, namespace, path string) (EntityInfo, error) {
	key := path
	if namespace != r.job.Namespace {
		key = namespace + "\x00" + path
	}
	if info, ok := r.infos[key]; ok {
		return info, nil
	}
	broker, err := r.brokerOf(namespace)
	if err != nil {
		return EntityInfo{}, err
	}
	info, _, err := retry(ctx, r, "read "+path, func() (EntityInfo, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return broker.Entity(cctx, path)
	})
	if err != nil {
		return info, err
	}
	r.infos[key] = info
	return info, nil
}

// brokerOf is namespace's broker, or a halt saying it is not configured
// (any more: the job was created under another configuration).
func (r *run) brokerOf(namespace string) (Broker, error) {
	b, err := r.e.broker(namespace)
	if err != nil {
		return nil, &halt{reason: fmt.Sprintf("the namespace %s is not configured: configure it again, or cancel this job (%v)", namespace, err)}
	}
	return b, nil
}

// destination is where copies of the messages of entity go.
func (r *run) destination(ctx context.Context, entity string) (EntityInfo, error) {
	path := r.job.Destination
	if path == "" {
		src, err := r.entity(ctx, entity)
		if err != nil {
			return EntityInfo{}, err
		}
		path = entity
		if src.Kind == dlq.KindSubscription {
			path = src.Topic
		}
	}
	info, err := r.entityIn(ctx, r.job.SendsTo(), path)
	if errors.Is(err, dlq.ErrEntityNotFound) {
		return info, &halt{reason: r.destName(path) + " does not exist (any more): create it, or cancel this job and replay elsewhere"}
	}
	return info, err
}

func (r *run) sender(ctx context.Context, path string) (Sender, error) {
	if s := r.senders[path]; s != nil {
		return s, nil
	}
	broker, err := r.brokerOf(r.job.SendsTo())
	if err != nil {
		return nil, err
	}
	s, _, err := retry(ctx, r, "open a sender to "+path, func() (Sender, error) { return broker.OpenSender(ctx, path) })
	if err != nil {
		return nil, err
	}
	r.senders[path] = s
	return s, nil
}

func (r *run) closeSenders(ctx context.Context) {
	for _, s := range r.senders {
		_ = s.Close(ctx)
	}
}

// destinationSender returns where the copies of entity's messages go and a
// sender to it, or a halt that says why they cannot go there.
func (r *run) destinationSender(ctx context.Context, entity string) (EntityInfo, Sender, error) {
	dest, err := r.destination(ctx, entity)
	if err != nil {
		return dest, nil, r.brokerHalt("read the destination", err)
	}
	if dest.Kind == dlq.KindSubscription {
		return dest, nil, &halt{reason: "the destination " + dest.Path + " is a subscription: send to its topic or a queue"}
	}
	sender, err := r.sender(ctx, dest.Path)
	if err != nil {
		if errors.Is(err, dlq.ErrEntityNotFound) || errors.Is(err, dlq.ErrEntityDisabled) {
			return dest, nil, r.sendHalt(dest, err) // the same words as a send's
		}
		return dest, nil, r.brokerHalt("open a sender to "+dest.Path, err)
	}
	return dest, sender, nil
}
