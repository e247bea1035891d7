package io.fencepost;

/** The client's version: the project's (package.json's), checked by VersionTest. */
public final class Version {
  /** The version of this client, equal to the project's. */
  public static final String VERSION = "0.1.0";

  private Version() {}
}
