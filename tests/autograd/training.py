"""What several training tests share: the eager reference run a captured step is checked against."""


def eager_losses(model, optimizer, loss_fn, batches):
    """Train model eagerly, one optimizer step per (input, target) batch; the losses, as floats."""
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
