package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlqdash/dlqdash/dlq"
)

// entity returns (and caches) what the broker says about path.
func (r *run) entity(ctx context.Context, path string) (EntityInfo, error) {
	if info, ok := r.infos[path]; ok {
		return info, nil
	}
	info, _, err := retry(ctx, r, "read "+path, func() (EntityInfo, error) {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		return r.e.cfg.Broker.Entity(cctx, path)
	})
	if err != nil {
		return info, err
	}
	r.infos[path] = info
	return info, nil
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
	info, err := r.entity(ctx, path)
	if errors.Is(err, dlq.ErrEntityNotFound) {
		return info, &halt{reason: fmt.Sprintf("the destination %s does not exist (any more): create it, or cancel this job and replay elsewhere", path)}
	}
	return info, err
}

func (r *run) sender(ctx context.Context, path string) (Sender, error) {
	if s := r.senders[path]; s != nil {
		return s, nil
	}
	s, _, err := retry(ctx, r, "open a sender to "+path, func() (Sender, error) { return r.e.cfg.Broker.OpenSender(ctx, path) })
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
		if errors.Is(err, dlq.ErrEntityNotFound) {
			return dest, nil, &halt{reason: fmt.Sprintf("the destination %s does not exist (any more): create it, or cancel this job", dest.Path)}
		}
		return dest, nil, r.brokerHalt("open a sender to "+dest.Path, err)
	}
	return dest, sender, nil
}
