package consumer;

import io.fencepost.FencepostException;
import io.fencepost.Lock;
import io.fencepost.Token;

/** Parses a token and asks an agent that is not there: both through the installed jar only. */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    if (Token.parse("215") != 215L) throw new AssertionError("Token.parse");
    try (Lock lock = Lock.acquire("billing", new Lock.Options().baseUrl("http://127.0.0.1:1"))) {
      throw new AssertionError("acquired without an agent: token " + lock.token());
    } catch (FencepostException e) {
      if (!e.getMessage().contains("/v1/locks/billing/acquire")) throw new AssertionError(e.getMessage(), e);
    }
    System.out.println("module " + Lock.class.getModule().getName() + " " + Lock.class.getModule().getDescriptor().rawVersion().orElse("?") + ": ok");
  }
}
