// Gradle settings for the JetBrains plugin, for people who build it with a current IntelliJ Platform SDK (CI uses build.sh instead; see README.md).
plugins {
    id("org.gradle.toolchains.foojay-resolver-convention") version "0.8.0"
}

rootProject.name = "koru-jetbrains"
